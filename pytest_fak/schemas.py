"""JSON Schema → Hypothesis strategy: ``hypothesis-jsonschema``, on every Hypothesis we support.

``hypothesis-jsonschema`` (0.23, its last release) draws the members of an object through
Hypothesis' internal collection helper ``many``, calling ``more()`` and ``reject()`` on it.
Hypothesis 6.170.10 replaced that protocol: ``many`` is now a context manager that is
iterated (``with many(...) as elements: for _ in elements: ...``), and the old calls fail
with ``AttributeError: 'many' object has no attribute 'more'`` on the first object schema.

:func:`from_schema` is ``hypothesis_jsonschema.from_schema`` with that one call site served
by :class:`_Elements`, which speaks the old protocol on top of the new helper. Only the
name ``cu`` inside ``hypothesis_jsonschema._from_schema`` is pointed at the adapter, and
only when the installed Hypothesis lacks ``many.more``: Hypothesis itself, and any other
user of it, is untouched, and with an older Hypothesis nothing changes at all. A Hypothesis
whose ``many`` speaks neither protocol is refused with an error that says so, never
generated from silently.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from hypothesis import strategies as st

__all__ = ["SchemaGeneratorError", "from_schema"]


class SchemaGeneratorError(RuntimeError):
    """The installed Hypothesis and ``hypothesis-jsonschema`` cannot work together."""


class _Elements:
    """``many(...)``'s pre-6.170.10 protocol (``more()``, ``reject()``) over the new one."""

    def __init__(self, data: Any, **sizes: Any) -> None:
        from hypothesis.internal.conjecture import utils as cu

        many: Any = cu.many  # typed by whichever Hypothesis is installed: read it as Any
        self._many = many(data, **sizes)
        self._many.__enter__()
        self._each: Iterator[None] = iter(self._many)

    def more(self) -> bool:
        """Whether to draw one more element; ``False`` closes the collection."""
        try:
            next(self._each)
        except StopIteration:
            self._many.__exit__(None, None, None)  # the protocol's close (a no-op today)
            return False
        return True

    def reject(self, why: str | None = None) -> None:
        """The element just drawn is not kept (it does not count towards the size)."""
        self._many.reject(why)


class _ConjectureUtils:
    """What ``hypothesis_jsonschema._from_schema`` reads from its ``cu`` module: ``many``."""

    many = _Elements


def _adapted() -> Any:
    """``hypothesis_jsonschema.from_schema``, its object strategy served by :class:`_Elements`
    where the installed Hypothesis needs it."""
    try:
        import hypothesis_jsonschema

        generator: Any = importlib.import_module("hypothesis_jsonschema._from_schema")
    except ImportError as exc:
        raise SchemaGeneratorError(
            "generating tool arguments from a JSON Schema needs hypothesis-jsonschema: "
            "pip install 'pytest-fak[plugin]' (or pip install 'hypothesis-jsonschema>=0.23')"
        ) from exc
    from hypothesis.internal.conjecture import utils as cu

    if generator.cu is cu and not hasattr(cu.many, "more"):
        if not all(hasattr(cu.many, name) for name in ("__enter__", "__iter__", "reject")):
            raise SchemaGeneratorError(
                "this Hypothesis release changed the collection helper hypothesis-jsonschema "
                "draws objects with (hypothesis.internal.conjecture.utils.many) in a way "
                "pytest_fak.schemas does not know; pin the Hypothesis of the last release "
                "that worked and report it"
            )
        generator.cu = _ConjectureUtils
    return hypothesis_jsonschema.from_schema


def from_schema(schema: Mapping[str, Any] | bool) -> st.SearchStrategy[Any]:
    """A strategy for the JSON values that satisfy ``schema`` (``hypothesis-jsonschema``'s
    reading of it: drafts 4 to 7, and the 2020-12 keywords it knows)."""
    strategy: st.SearchStrategy[Any] = _adapted()(
        schema if isinstance(schema, bool) else dict(schema)
    )
    return strategy
