"""Policy-supplied patterns run through RE2 (D2.6): linear, refused at load if RE2 cannot.

The oracles are string predicates written by hand for each catastrophic shape (no regex
engine), and Python's ``re`` for the differential on patterns both engines accept.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import Kernel, PolicyError, ToolCall, VerdictKind
from fak_core.calls import Result, Status
from fak_core.patterns import compile_policy_pattern
from fak_core.policy import load_policy


# ------------------------------------------------------------ catastrophic shapes + oracles
@st.composite
def _catastrophic(draw: st.DrawFn) -> tuple[str, Any]:
    """A backtracking-catastrophic pattern over ``a``/``b`` and a predicate for its matches."""
    shape = draw(st.sampled_from(["nested-end", "alt-star", "dotstar-n", "nested-b"]))
    depth = draw(st.integers(1, 4))
    if shape == "nested-end":  # ((a+)+)+$: the text ends with an a
        return "(" * depth + "a+" + ")+" * depth + "$", lambda t: t.endswith("a")
    if shape == "alt-star":  # (a|a|...)*b: some b occurs
        alts = "|".join(["a"] * (depth + 1))
        return f"({alts})*b", lambda t: "b" in t
    if shape == "dotstar-n":  # (.*a){n}: at least n a's (texts hold no newline)
        n = draw(st.integers(2, 12))
        return f"(.*a){{{n}}}", lambda t: t.count("a") >= n
    inner = draw(st.sampled_from(["a*", "a+", "(a|aa)+", "(a*)*"]))  # nested quantifiers, then b
    return "(" * depth + inner + ")*" * depth + "b", lambda t: "b" in t


_ADVERSARIAL = st.builds(
    lambda n, tail, k: "a" * n + tail + "a" * k,
    st.integers(0, 4096),
    st.sampled_from(["", "b", "c", "!"]),
    st.integers(0, 3),
)


def _kernel(doc: dict[str, Any]) -> Kernel:
    return Kernel(policy=load_policy(json.dumps(doc), fmt="json"))


@pytest.mark.fak_theorem("D2.6")
@settings(max_examples=60, deadline=None)
@given(_catastrophic(), _ADVERSARIAL)
def test_catastrophic_deny_regex_runs_through_re2(case: tuple[str, Any], text: str) -> None:
    pattern, matches = case
    kernel = _kernel(
        {"allow": ["note"], "arg_rules": [{"tool": "note", "arg": "body", "deny_regex": pattern}]}
    )
    compiled = kernel.floor._rules["note"][0][1]
    assert isinstance(compiled, re2._Regexp), type(compiled)  # before any search runs
    verdict = kernel.decide(ToolCall("note", json.dumps({"body": text})))
    assert (verdict.kind == VerdictKind.DENY) == matches(text), (pattern, len(text))


@pytest.mark.fak_theorem("D2.6")
@settings(max_examples=60, deadline=None)
@given(_catastrophic(), _ADVERSARIAL)
def test_catastrophic_secret_pattern_runs_through_re2(case: tuple[str, Any], text: str) -> None:
    pattern, matches = case
    kernel = _kernel({"allow": ["read"], "secret_patterns": [pattern]})
    extra = kernel.screen._extra_secret
    assert isinstance(extra, re2._Regexp), type(extra)  # before any search runs
    verdict = kernel.screen_text(ToolCall("read", {}), Result(Status.OK, text))
    assert (verdict.kind == VerdictKind.QUARANTINE) == matches(text), (pattern, len(text))


# -------------------------------------------------------------- refused at load, key named
_REFUSED = st.sampled_from(
    [
        r"(a)\1",
        r"(?P<x>a)(?P=x)",
        r"(?=a)b",
        r"(?!a)b",
        r"(?<=a)b",
        r"(?<!a)b",
        r"a++",
        r"a*+b",
        r"(?>a+)b",
        r"a{1001}",
    ]
)


@pytest.mark.fak_theorem("D2.6")
@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["x", "[ab]+", "c|d"]), max_size=3),
    _REFUSED,
    st.booleans(),
    st.booleans(),
)
def test_patterns_re2_cannot_compile_are_refused_at_load(
    fine: list[str], bad: str, as_secret: bool, toml: bool
) -> None:
    at = len(fine)
    entries = [*fine, bad]
    if as_secret:
        doc: dict[str, Any] = {"secret_patterns": entries}
        key = f"secret_patterns[{at}]"
    else:
        doc = {
            "arg_rules": [{"tool": "t", "arg": "a", "deny_regex": p} for p in entries],
        }
        key = f"arg_rules[{at}].deny_regex"
    if toml:
        import tomli_w

        text, fmt = tomli_w.dumps(doc), "toml"
    else:
        text, fmt = json.dumps(doc), "json"
    with pytest.raises(PolicyError) as err:
        load_policy(text, fmt=fmt)
    message = str(err.value)
    assert repr(key) in message and "RE2" in message, message


# ------------------------------------------------------------------ differential with re
_ATOMS = st.sampled_from(["a", "b", "c", ".", "[ab]", "[^a]", "[a-c]", r"\.", "x"])


def _quantified(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    quant = st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,2}", "*?", "+?"])
    return st.tuples(inner, quant).map(lambda pq: f"(?:{pq[0]}){pq[1]}")


_SIMPLE = st.recursive(
    _ATOMS,
    lambda inner: st.one_of(
        _quantified(inner),
        st.lists(inner, min_size=2, max_size=3).map("".join),
        st.lists(inner, min_size=2, max_size=3).map("|".join),
    ),
    max_leaves=6,
)


@pytest.mark.fak_theorem("D2.6")
@settings(max_examples=300, deadline=None)
@given(
    st.tuples(st.sampled_from(["", "^"]), _SIMPLE, st.sampled_from(["", "$"])).map("".join),
    st.text(alphabet="abcx.", max_size=12),
)
def test_re2_agrees_with_re_on_simple_patterns(pattern: str, text: str) -> None:
    ours = compile_policy_pattern(pattern, "arg_rules[0].deny_regex")
    assert (ours.search(text) is not None) == (re.search(pattern, text) is not None), pattern


_SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)
# filler that cannot spell the token or touch its digits (no t, o, k, _ or digits)
_FILLER = st.text(st.sampled_from("abcxyz .\n\u00e9\u4e2d"), max_size=12)


@st.composite
def _with_surrogates(draw: st.DrawFn) -> tuple[str, bool]:
    """(text, whether it holds ``tok_<digits>``): filler, lone surrogates (high or low, one
    or several, anywhere but inside the token) and the token or a near miss (``tok_``)."""
    token = draw(st.sampled_from(["tok_" + str(draw(st.integers(0, 10**6))), "tok_", "tok"]))
    found = token[4:].isdigit() and len(token) > 4
    parts = [draw(_FILLER), token, draw(_FILLER)]
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.sampled_from([0, 2]))  # before or after the token, never inside
        i = draw(st.integers(0, len(parts[at])))
        parts[at] = parts[at][:i] + draw(_SURROGATES) + parts[at][i:]
    return "".join(parts), found


@pytest.mark.fak_theorem("C4.5")
@given(_with_surrogates())
def test_a_policy_secret_pattern_screens_a_result_with_a_lone_surrogate(
    case: tuple[str, bool],
) -> None:
    text, found = case
    kernel = _kernel({"secret_patterns": ["tok_[0-9]+"]})
    verdict = kernel.screen_text(ToolCall("read"), Result(Status.OK, text))
    assert "error" not in verdict.meta, verdict
    assert (verdict.kind == VerdictKind.QUARANTINE) == found, (text, verdict)


@pytest.mark.fak_theorem("D2.6")
@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(", "missing ): ("),
        ("(a)\\1", "invalid escape sequence: \\1"),
        ("é(", "missing ): é("),
        ("a{2000}", "invalid repetition size: {2000}"),
    ],
)
def test_a_refused_pattern_quotes_re2s_reason_as_text(pattern: str, reason: str) -> None:
    with pytest.raises(PolicyError) as err:
        load_policy(json.dumps({"secret_patterns": ["x", pattern]}), "json")
    assert f"'secret_patterns[1]': invalid regular expression {pattern!r} for RE2 ({reason});" in (
        str(err.value)
    )


@pytest.mark.fak_theorem("D2.6")
@pytest.mark.parametrize("pattern", ["\ud800", "a\udfffb", "[\udc00-\udcff]"])
def test_a_pattern_holding_a_lone_surrogate_is_refused_naming_its_key(pattern: str) -> None:
    doc = {"arg_rules": [{"tool": "t", "arg": "a", "deny_regex": pattern}]}
    with pytest.raises(PolicyError, match=r"'arg_rules\[0\]\.deny_regex'.*lone surrogate"):
        load_policy(json.dumps(doc), "json")
