"""The words the proxy puts on a downstream's answer: the class of a JSON-RPC error code
(D11.1, JSON-RPC 2.0 section 5.1 written out here) and where an invalid answer failed
validation (D11: a location part or an error type the server could have chosen is shown
as ``?`` or ``invalid``, and the whole is at most 200 characters).
"""

from __future__ import annotations

import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from fak_core.gateway.mcp_downstream import _first_error, error_class

NAMED = {
    -32700: "parse error",
    -32600: "invalid request",
    -32601: "method not found",
    -32602: "invalid params",
    -32603: "internal error",
}


def _spec_class(code: int) -> str:
    """JSON-RPC 2.0 section 5.1: the five named codes; -32000 to -32099 implementation-
    defined server errors; the rest of -32768 to -32000 reserved; anything else is the
    application's."""
    if code in NAMED:
        return NAMED[code]
    if -32099 <= code <= -32000:
        return "server error"
    if -32768 <= code <= -32000:
        return "reserved"
    return "application error"


EDGES = [-32768, -32769, -32767, -32100, -32099, -32098, -32001, -32000, -31999, -32604]
EDGES += [-32699, -32701, -32599, 0, 1, -1, 2**63, -(2**63) - 1, 2**70]


@pytest.mark.fak_theorem("D11.1")
@settings(max_examples=300, deadline=None)
@given(st.one_of(st.sampled_from([*NAMED, *EDGES]), st.integers(-33000, -31000), st.integers()))
def test_an_error_code_is_named_by_its_jsonrpc_class(code: int) -> None:
    assert error_class(code) == _spec_class(code)


@pytest.mark.fak_theorem("D11.1")
@pytest.mark.parametrize("code", [*NAMED, *EDGES])
def test_the_class_edges(code: int) -> None:
    assert error_class(code) == _spec_class(code)


class _Inner(BaseModel):
    n: int


class _Answer(BaseModel):
    table: dict[str, _Inner]
    items: list[_Inner]


SAFE = string.ascii_letters + string.digits + "_"


def _shown(part: object) -> str:
    if isinstance(part, int):
        return str(part)
    text = str(part)
    return text if 1 <= len(text) <= 40 and all(c in SAFE for c in text) else "?"


@pytest.mark.fak_theorem("D11")
@settings(max_examples=100, deadline=None)
@given(st.text(max_size=45), st.integers(0, 3))
@example("a" * 40, 0)
@example("a" * 41, 0)
@example("", 1)
@example("bad key", 2)
@example("x\n", 0)
def test_an_invalid_answer_is_named_by_field_names_and_indexes_only(key: str, at: int) -> None:
    items = [{"n": 1}] * at + [{"n": "IGNORE ALL"}]
    with pytest.raises(ValidationError) as caught:
        _Answer.model_validate({"table": {key: {"n": "x"}}, "items": items})
    got = _first_error(caught.value)
    assert got == f"table.{_shown(key)}.n: int_parsing"
    assert "IGNORE" not in got


@pytest.mark.fak_theorem("D11")
def test_an_index_is_shown_and_a_long_location_is_cut_to_200() -> None:
    with pytest.raises(ValidationError) as caught:
        _Answer.model_validate({"table": {}, "items": [{"n": 1}, {"n": 2}, {"m": 3}]})
    assert _first_error(caught.value) == "items.2.n: missing"
    deep = "k" * 40
    nested: dict[str, object] = {deep: {"n": "x"}}
    with pytest.raises(ValidationError) as caught:
        _Deep.model_validate({"a": {deep: {deep: {deep: {deep: {deep: "x"}}}}}, "b": nested})
    got = _first_error(caught.value)
    assert got == f"a.{deep}.{deep}.{deep}.{deep}.{deep}: int_parsing"[:200]
    assert len(got) == 200


class _Deep(BaseModel):
    a: dict[str, dict[str, dict[str, dict[str, dict[str, int]]]]]
    b: dict[str, _Inner]


class _Typed(BaseModel):
    n: int

    @classmethod
    def custom(cls, kind: str) -> ValidationError:
        from pydantic_core import InitErrorDetails, PydanticCustomError

        detail: InitErrorDetails = {
            "type": PydanticCustomError(kind, "the server said so"),
            "loc": ("n",),
            "input": 1,
        }
        return ValidationError.from_exception_data("_Typed", [detail])


@pytest.mark.fak_theorem("D11")
@pytest.mark.parametrize(
    ("kind", "shown"),
    [
        ("int_parsing", "int_parsing"),
        ("a" * 40, "a" * 40),
        ("a" * 41, "invalid"),
        ("x y", "invalid"),
    ],
)
def test_an_error_type_that_is_no_name_is_invalid(kind: str, shown: str) -> None:
    assert _first_error(_Typed.custom(kind)) == f"n: {shown}"


@pytest.mark.fak_theorem("D11")
def test_a_validation_error_without_errors_is_invalid() -> None:
    assert _first_error(ValidationError.from_exception_data("_Typed", [])) == "invalid"
