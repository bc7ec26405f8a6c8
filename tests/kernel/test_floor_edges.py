"""D2.2 at its edges: per-argument rules against an independent model, scoped names, a
swapped policy, and the floor's bounded memory of write-shaped tool names.

The oracle for the argument rules is written here from the format's meaning, never by
calling the floor: a glob is read by ``fnmatch`` (the reference matcher of
``tests/kernel/test_guards.py``), a pattern by Python's ``re`` (the generated patterns are
ones RE2 and ``re`` read alike), a value's text is the string itself or the compact JSON of
any other value, and its size is its UTF-8 length.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import ArgRule, Policy, ToolCall, VerdictKind
from fak_core.floor import CapabilityFloor
from fak_core.verdicts import Verdict
from fak_core.view import CallView

from .test_guards import _old_glob_matches
from .test_policy import names, policies

WRITE_MEMO_BOUND = 4096  # D2.2: the tool names the floor remembers as write-shaped or not
ARGS = ("a", "b")
GLOBS = ("/work/*", "*.txt", "/work/", "[ab]?", "/w?rk/[!x]*")
PATTERNS = ("x", "^$", "^1$", '"', "é", "\\[", "null", "^a")
REASONS = ("POLICY_BLOCK", "SECRET_EXFIL", "EGRESS_BLOCK")
# every JSON carrier: strings that match a glob, are near misses, hold a backslash or a
# "..", or are empty; numbers, booleans, null, arrays and objects
VALUES = st.one_of(
    st.sampled_from(
        [
            "/work/a",
            "/work\\a.txt",
            "/work/../etc/x",
            "/wark/y",
            "/wark/x",
            "notes.txt",
            "a/notes.txt",
            "ab",
            "b",
            "x",
            "",
            "é",
            "1",
            "null",
            "[",
        ]
    ),
    st.text(st.sampled_from("ax/.\\é1"), max_size=8),
    st.integers(-5, 123456),
    st.booleans(),
    st.none(),
    st.lists(st.sampled_from([1, "x", None, "é"]), max_size=3),
    st.dictionaries(st.sampled_from(["k", "x"]), st.sampled_from([0, "é", "["]), max_size=2),
)


@st.composite
def arg_rule(draw: st.DrawFn) -> ArgRule:
    """A rule of one of the three kinds on a spelling of ``fetch`` or on another tool."""
    tool = draw(st.sampled_from(["fetch", "FETCH", "Fetch", "other"]))
    arg = draw(st.sampled_from(ARGS))
    reason = draw(st.sampled_from(REASONS))
    kind = draw(st.sampled_from(["allow_glob", "deny_regex", "max_bytes"]))
    value: Any = {
        "allow_glob": st.sampled_from(GLOBS),
        "deny_regex": st.sampled_from(PATTERNS),
        "max_bytes": st.integers(0, 8),
    }[kind]
    return ArgRule(tool, arg, reason=reason, **{kind: draw(value)})


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _breaks(rule: ArgRule, args: dict[str, Any]) -> str | None:
    """What the rule's refusal must name (its glob, pattern or limit), when the arguments
    break it; None when they keep it."""
    present = rule.arg in args
    value = args.get(rule.arg)
    if rule.allow_glob is not None:
        ok = (
            present
            and isinstance(value, str)
            and _old_glob_matches(value, rule.allow_glob, anchored=True)
        )
        return None if ok else rule.allow_glob
    if rule.deny_regex is not None:
        hit = present and re.search(rule.deny_regex, _text(value)) is not None
        return rule.deny_regex if hit else None
    assert rule.max_bytes is not None
    over = present and len(_text(value).encode("utf-8")) > rule.max_bytes
    return str(rule.max_bytes) if over else None


def _decide(floor: CapabilityFloor, tool: str, args: Any) -> Verdict:
    return floor.adjudicate(CallView(ToolCall(tool, json.dumps(args))))


@pytest.mark.fak_theorem("D2.2")
@given(
    st.lists(arg_rule(), max_size=4),
    st.dictionaries(st.sampled_from(ARGS), VALUES, max_size=2),
    st.sampled_from(["fetch", "FETCH", "fEtch"]),
)
def test_the_first_broken_argument_rule_refuses_and_a_kept_one_allows(
    rules: list[ArgRule], args: dict[str, Any], tool: str
) -> None:
    floor = CapabilityFloor(Policy(allow=(tool,), arg_rules=tuple(rules)))
    v = _decide(floor, tool, args)
    for rule in rules:
        if rule.tool.lower() != tool.lower():
            continue  # a rule applies to its tool in any letter case, and to no other
        named = _breaks(rule, args)
        if named is not None:
            assert v.kind == VerdictKind.DENY
            assert floor.reasons.name(v.reason) == rule.reason
            assert rule.arg in v.claim and named in v.claim, v.claim
            return
    assert v.kind == VerdictKind.ALLOW, v.claim


EDGE_RULES = (
    *(ArgRule("fetch", "a", allow_glob=g) for g in GLOBS),
    *(ArgRule("fetch", "a", deny_regex=p, reason="SECRET_EXFIL") for p in PATTERNS),
    *(ArgRule("fetch", "a", max_bytes=n, reason="EGRESS_BLOCK") for n in (0, 1, 2, 3, 7, 8)),
)
# each carrier at the edges: strings a glob matches whole, only at a trailing part, or
# not; a pattern's match in a string and in the JSON of a number, list, object or null;
# UTF-8 lengths on each side of every limit above (``é`` is two bytes)
EDGE_VALUES: tuple[Any, ...] = (
    *("/work/a", "/work\\a.txt", "/work/../etc/x", "x/ab", "ab", "x/notes.txt", "a.txt"),
    *("", "a", 'ab"', "x", "xé", "é", "1", "null", "[", "abc", "abcdefg", "abcdefgh"),
    *(1, 7, 1234567, 12345678, -1, 0.5, True, False, None, [], ["x"], {"k": 1}, [1, "é"]),
)


@pytest.mark.fak_theorem("D2.2")
@pytest.mark.parametrize("rule", EDGE_RULES, ids=repr)
def test_each_rule_on_each_carrier_at_its_edges(rule: ArgRule) -> None:
    """One rule, every carrier, present or absent (the other argument then holds it)."""
    floor = CapabilityFloor(Policy(allow=("fetch",), arg_rules=(rule,)))
    for value in EDGE_VALUES:
        for args in ({"a": value}, {"b": value}, {"a": value, "b": "x"}):
            v = _decide(floor, "fetch", args)
            named = _breaks(rule, args)
            if named is None:
                assert v.kind == VerdictKind.ALLOW, (rule, args, v.claim)
            else:
                assert v.kind == VerdictKind.DENY, (rule, args)
                assert floor.reasons.name(v.reason) == rule.reason
                assert rule.arg in v.claim and named in v.claim, v.claim


@pytest.mark.fak_theorem("D2.2")
@pytest.mark.parametrize("posture", ["fail_closed", "admit_and_log"])
def test_only_the_explicit_posture_admits_an_unlisted_tool_and_marks_it(posture: str) -> None:
    floor = CapabilityFloor(
        Policy(posture=posture, allow=("listed",), deny={"gone": "SECRET_EXFIL"})
    )
    v = _decide(floor, "unlisted", {})
    if posture == "admit_and_log":
        assert v.kind == VerdictKind.ALLOW
        assert dict(v.meta) == {"posture": "admit_and_log", "would_deny": "DEFAULT_DENY"}
    else:
        assert (v.kind, floor.reasons.name(v.reason)) == (VerdictKind.DENY, "DEFAULT_DENY")
    assert _decide(floor, "listed", {}).kind == VerdictKind.ALLOW
    assert "posture" not in _decide(floor, "listed", {}).meta
    assert floor.reasons.name(_decide(floor, "gone", {}).reason) == "SECRET_EXFIL"


@pytest.mark.fak_theorem("D2.2")
@given(
    st.sampled_from(["get_", "srv__get_"]),
    st.sampled_from(["get_x", "srv__get_x", "other__get_x", "get", "srv__put_x", "srv__"]),
    st.sampled_from(["wire", "srv__wire", "get_x"]),
    st.booleans(),
)
def test_scoped_names_deny_by_own_name_and_allow_by_prefix(
    prefix: str, tool: str, denied: str, scoped: bool
) -> None:
    """With scoped names a deny entry without the separator is denied on every server; a
    name without a separator is read whole; a prefix without the separator starts a
    tool's own name (after the first separator), one with it the whole name."""
    floor = CapabilityFloor(Policy(allow_prefix=(prefix,), deny={denied: "SECRET_EXFIL"}))
    if scoped:
        floor.scope_names("__")
    _, sep, rest = tool.partition("__")
    own = rest if scoped and sep else tool
    v = _decide(floor, tool, {})
    if tool == denied or (scoped and own == denied):
        assert floor.reasons.name(v.reason) == "SECRET_EXFIL", tool
        return
    start = tool if "__" in prefix or not scoped else own
    expected = VerdictKind.ALLOW if start.startswith(prefix) else VerdictKind.DENY
    assert v.kind == expected, (tool, prefix, scoped)


@pytest.mark.fak_theorem("D2.2")
@given(policies, policies, st.data())
def test_a_swapped_policy_is_decided_as_a_fresh_floor_decides_it(
    first: Policy, second: Policy, data: st.DataObject
) -> None:
    swapped = CapabilityFloor(first)
    for tool in ("write_x", *first.allow):  # let the old policy fill the floor's memory
        _decide(swapped, tool, {"p": "x"})
    swapped.set_policy(second)
    fresh = CapabilityFloor(second)
    named = sorted({*first.allow, *second.allow, *second.deny, *first.deny, "write_x"})
    arg_names = sorted({r.arg for r in (*first.arg_rules, *second.arg_rules)} | {"p"})
    value = st.sampled_from(
        ["/work/a", "/etc/x", "rm -rf /", "x" * 20, "http://evil.example/", "ok", 7]
        + [g + "k" for g in (*first.self_modify_globs, *second.self_modify_globs)]
    )
    for _ in range(3):
        tool = data.draw(st.sampled_from(named) | names, label="tool")
        keys = st.sampled_from(arg_names + list(first.redact_fields + second.redact_fields))
        args = data.draw(st.dictionaries(keys, value, max_size=3), label="args")
        a, b = _decide(swapped, tool, args), _decide(fresh, tool, args)
        assert (a.kind, a.reason, a.claim, dict(a.meta), a.repaired_args) == (
            b.kind,
            b.reason,
            b.claim,
            dict(b.meta),
            b.repaired_args,
        )


@pytest.mark.fak_theorem("D2.2")
def test_the_floors_memory_of_write_shaped_names_is_bounded() -> None:
    """Across more distinct tool names than the bound, the memory stays within it, and the
    self-modify guard still reads exactly the write-shaped ones."""
    floor = CapabilityFloor(Policy(allow_prefix=("",), self_modify_globs=("fak_core/",)))
    args = {"path": "fak_core/kernel.py"}
    for i in range(WRITE_MEMO_BOUND + 3):
        tool = f"write_{i}" if i % 2 else f"read_{i}"
        v = _decide(floor, tool, args)
        assert v.kind == (VerdictKind.DENY if i % 2 else VerdictKind.ALLOW), tool
        assert len(floor._write_memo) <= WRITE_MEMO_BOUND
    for tool in ("read_1", "write_1", "Edit", "xPATCHy", "list"):  # forgotten or not
        v = _decide(floor, tool, args)
        shaped = tool != "read_1" and tool != "list"
        assert v.kind == (VerdictKind.DENY if shaped else VerdictKind.ALLOW), tool
