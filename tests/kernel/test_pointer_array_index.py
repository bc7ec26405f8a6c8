"""A declared pointer's token that meets an array (C4.6): RFC 6901's ``array-index`` is
``0`` or ASCII digits without a leading zero; ``-`` names the element past the end
(nothing); any other token there (a leading zero, a superscript or Arabic-Indic digit, a
sign, a letter) is no index, and the gate refuses the call saying so, never reading it as
nothing to check nor as the element a lenient reader would take it for.

The oracle is the RFC's grammar written out by character class, apart from the code.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy, Reason, Result, Status, ToolCall, ToolDecl, VerdictKind
from fak_core.grounding import _canonical
from fak_core.taint import Taint
from fak_core.verdicts import Verdict

V2 = "fak-policy/v2"
ELEMENTS = ["evil0.example", "evil1.example", "evil2.example"]
ASCII_DIGITS = "0123456789"


@pytest.fixture(autouse=True)
def _fresh_canonical_forms() -> None:
    """A canonical form the real code cached must not answer for a mutant."""
    _canonical.cache_clear()


def _is_array_index(token: str) -> bool:
    """RFC 6901 section 4: ``array-index = %x30 / ( %x31-39 *(%x30-39) )``."""
    if token == "0":
        return True
    return token[:1] in set("123456789") and all(c in ASCII_DIGITS for c in token)


def _escaped(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _decide(destinations: tuple[str, ...], content: tuple[str, ...], args: object) -> Verdict:
    decl = ToolDecl("EGRESS", destinations, content=content)
    k = Kernel(Policy(version=V2, allow=("send", "fetch"), tools={"send": decl}))
    k.record_trusted("s", "hello there")
    k.admit(ToolCall("fetch", "{}", "s"), Result(Status.OK, "nothing here"))
    k.ledger.raise_to("s", Taint.TAINTED)
    return k.decide(ToolCall("send", json.dumps(args), "s"))


def _not_an_index(pointer: str, token: str) -> str:
    return (
        f"EGRESS sink fed tainted data: {pointer}: {token!r} where it meets an array is not "
        "an RFC 6901 array index"
    )


def _ungrounded(pointer: str, value: str) -> str:
    return (
        f"EGRESS sink fed tainted data: {pointer} = {value!r} is not grounded; it appears in "
        "no content this session admitted"
    )


TOKENS = st.text(
    alphabet=st.sampled_from(
        [*ASCII_DIGITS, "\u00b2", "\u0661", "\uff11", "\u0967", "-", "+", "_", " ", "x", "~"]
    ),
    min_size=0,
    max_size=4,
)


@pytest.mark.fak_theorem("C4.6")
@settings(max_examples=150, deadline=None)
@given(TOKENS, st.booleans())
@example("01", False)
@example("00", True)
@example("\u00b2", False)  # superscript two: str.isdigit, int() refuses it
@example("\u0661", True)  # Arabic-Indic one: str.isdigit, int() reads 1
@example("-1", False)
@example("1_0", False)  # int() reads 10
@example("-", False)
@example("", True)
@example("0", True)
@example("2", False)
@example("3", True)
@example("10", False)
def test_a_token_at_an_array_is_an_index_or_refused(token: str, as_content: bool) -> None:
    pointer = "/to/" + _escaped(token)
    args = {"to": ELEMENTS}
    v = _decide(() if as_content else (pointer,), (pointer,) if as_content else (), args)
    if token == "-" or (_is_array_index(token) and int(token) >= len(ELEMENTS)):
        assert v.kind == VerdictKind.ALLOW, v  # names nothing: nothing to check
        return
    assert v.kind == VerdictKind.DENY, v
    assert v.reason == Reason.TRUST_VIOLATION
    assert v.meta["ifc_ungrounded"] == pointer
    if _is_array_index(token):
        assert v.claim == _ungrounded(pointer, ELEMENTS[int(token)])
    else:
        assert v.claim == _not_an_index(pointer, token)


@pytest.mark.fak_theorem("C4.6")
@pytest.mark.parametrize("token", ["01", "\u00b2", "\u0661", "-1", "x"])
def test_the_same_token_at_an_object_is_a_member_name(token: str) -> None:
    pointer = "/to/" + _escaped(token)
    v = _decide((pointer,), (), {"to": {token: "evil9.example", "1": "evil1.example"}})
    assert v.kind == VerdictKind.DENY, v
    assert v.claim == _ungrounded(pointer, "evil9.example")


@pytest.mark.fak_theorem("C4.6")
def test_an_index_with_more_digits_than_any_int_reads_is_past_the_end() -> None:
    token = "1" * 5000  # past CPython's 4300-digit int() limit
    v = _decide(("/to/" + token,), (), {"to": ELEMENTS})
    assert v.kind == VerdictKind.ALLOW, v


@pytest.mark.fak_theorem("C4.6")
def test_a_refused_token_deeper_in_the_pointer_refuses_the_call() -> None:
    pointer = "/to/\u0661/addr"
    v = _decide((pointer,), (), {"to": [{"addr": "a.example"}, {"addr": "evil1.example"}]})
    assert v.kind == VerdictKind.DENY, v
    assert v.claim == _not_an_index(pointer, "\u0661")
