"""``pytest_fak.schemas.from_schema``: hypothesis-jsonschema on the installed Hypothesis.

Hypothesis 6.170.10 changed the internal collection helper hypothesis-jsonschema draws
object members with; the adapter speaks the old protocol over the new one. These tests
hold what it must keep: every generated object satisfies its schema (required members,
size bounds, dependencies that make the generator reject a member), the sizes between the
bounds are all reached, a failure shrinks to a minimal object, and a missing or
incompatible generator is a clear error. On a Hypothesis older than 6.170.10 the adapter
is not used, and the tests of it are skipped; the ``newest`` end of ``.ci/ranges`` runs
them.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import NonInteractiveExampleWarning
from hypothesis.internal.conjecture import utils as cu

from pytest_fak import schemas
from pytest_fak.schemas import SchemaGeneratorError, from_schema

NEW_PROTOCOL = not hasattr(cu.many, "more")
needs_new = pytest.mark.skipif(
    not NEW_PROTOCOL, reason="this Hypothesis still has many.more(): the adapter is not used"
)

OBJECT = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "minLength": 1},
        "cc": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "n": {"type": "integer", "minimum": 0},
    },
    "required": ["to"],
    "minProperties": 2,
    "maxProperties": 4,
    # "n" needs "cc": the generator drops (rejects) an "n" drawn without it
    "dependencies": {"n": {"required": ["cc"]}},
}


def _generator() -> Any:
    return importlib.import_module("hypothesis_jsonschema._from_schema")


def test_every_generated_object_satisfies_its_schema() -> None:
    seen: set[int] = set()

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(from_schema(OBJECT))
    def check(value: Any) -> None:
        jsonschema.validate(value, OBJECT)
        seen.add(len(value))

    check()
    assert seen == {2, 3, 4}, seen  # every size the bounds allow, none outside


def test_a_failure_shrinks_to_a_smallest_object() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}

    @settings(max_examples=300, deadline=None, database=None)
    @given(from_schema(schema))
    def check(value: Any) -> None:
        assert len(value) < 3

    with pytest.raises(AssertionError) as info:
        check()
    # the shrunk counterexample has exactly three members, each the simplest integer
    falsified = [n for n in getattr(info.value, "__notes__", []) if "value=" in n]
    assert falsified and falsified[0].count(": 0") == 3, info.value.__notes__


@needs_new
def test_without_the_adapter_objects_fail_on_this_hypothesis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The breakage the adapter exists for: hypothesis-jsonschema's own object strategy, on
    this Hypothesis, fails on the first object it draws."""
    from_schema(OBJECT)  # the adapter is in place
    monkeypatch.setattr(_generator(), "cu", cu)
    monkeypatch.setattr(
        schemas, "_adapted", lambda: importlib.import_module("hypothesis_jsonschema").from_schema
    )
    with pytest.warns(NonInteractiveExampleWarning), pytest.raises(AttributeError, match="more"):
        from_schema(OBJECT).example()


@needs_new
def test_the_adapter_is_installed_only_in_hypothesis_jsonschema() -> None:
    from_schema(OBJECT)
    assert _generator().cu is schemas._ConjectureUtils
    assert cu.many is not schemas._Elements  # Hypothesis itself is untouched


def test_an_older_hypothesis_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where ``many`` still has ``more()``, hypothesis-jsonschema keeps Hypothesis' own."""

    class OldMany:
        def more(self) -> bool:
            return False

    monkeypatch.setattr(_generator(), "cu", cu)
    monkeypatch.setattr(cu, "many", OldMany)
    schemas._adapted()
    assert _generator().cu is cu


def test_a_helper_of_neither_protocol_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Unknown:
        pass

    monkeypatch.setattr(_generator(), "cu", cu)
    monkeypatch.setattr(cu, "many", Unknown)
    with pytest.raises(SchemaGeneratorError, match="changed the collection helper"):
        from_schema(OBJECT)
    assert _generator().cu is cu


def test_without_hypothesis_jsonschema_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "hypothesis_jsonschema", None)
    with pytest.raises(SchemaGeneratorError, match=r"pip install 'pytest-fak\[plugin\]'"):
        from_schema(OBJECT)
