"""The floor reads protected paths, denied hosts and redacted keys in one walk
(``fak_core.argscan``): with all three readings (and an argument rule) on at once, each
still decides the call as it would alone, in the floor's order (D2.4, D2.5, D2.7).

The oracle is the generator: it knows which of a protected path, an argument-rule
violation, a denied host and a redacted key it planted (each at a random depth of its own
subtree, among benign siblings, in random order), whether the tool writes and whether the
policy allows it; the expected redaction is a plain recursive delete of the planted key.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fak_core import ArgRule, Kernel, Policy, ToolCall, VerdictKind
from tests.kernel.hostgen import DENY_ENTRIES, bare_of, denied_target, ordinary_target, url_of
from tests.kernel.test_guards import (
    FIELDS,
    FILLER,
    GLOBS,
    KEYS,
    WRITERS,
    _dropped,
    _without,
    carriers,
    planted,
    protected_paths,
    spellings,
)

READERS = ("get_x", "search_flights", "lookup_page", "fetch")
RULE_ARG = "mode"  # no generated key can spell it (KEYS is drawn from "abcde")
BENIGN = st.sampled_from(["SFO", "2026-12-01", "42", "hello world", "notes/todo.txt", ""])


def _escaped(raw: str) -> str:
    """``raw`` with every ``/`` and ``_`` written as a JSON escape: the same arguments, but
    a text in which no protected name occurs literally (neither occurs outside strings)."""
    return raw.replace("/", "\\/").replace("_", "\\u005f")


@st.composite
def host_plant(draw: st.DrawFn, single: bool) -> str:
    """A denied host in some encoding (``localhost`` only when the one-label name is on
    the deny list)."""
    targets = denied_target()
    if not single:
        targets = targets.filter(lambda t: t[0].text != "localhost")
    _, host, v6 = draw(targets)
    if draw(st.booleans()):
        return draw(url_of(host, v6, hostile=True))
    return draw(bare_of(host, v6))


@st.composite
def benign_host(draw: st.DrawFn) -> str:
    _, host, v6 = draw(ordinary_target())
    return draw(url_of(host, v6, hostile=False))


@st.composite
def calls(draw: st.DrawFn) -> dict[str, Any]:
    """A policy with every reading on, a tool, and arguments with a random set of plants."""
    single = draw(st.booleans())  # a one-label denied name turns off the letters shortcut
    deny = DENY_ENTRIES if single else tuple(e for e in DENY_ENTRIES if e != "localhost")
    fields = tuple(draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True)))
    write = draw(st.booleans())
    tool = draw(st.sampled_from(WRITERS if write else READERS))
    allowed = draw(st.booleans())
    policy = Policy(
        allow=(tool,) if allowed else ("some_other_tool",),
        self_modify_globs=GLOBS,
        deny_hosts=deny,
        redact_fields=fields,
        arg_rules=(ArgRule(tool, RULE_ARG, deny_regex="^forbidden$"),),
    )
    plants = draw(st.sets(st.sampled_from(["path", "rule", "host", "redacted"])))
    subtrees: list[Any] = []
    redacted: set[str] = set()
    if "path" in plants:
        how, text = draw(carriers(draw(protected_paths())))
        subtrees.append(draw(planted({text: draw(FILLER)} if how == "key" else text)))
    if "host" in plants:
        subtrees.append(draw(planted(draw(host_plant(single)))))
    if "redacted" in plants:
        key = draw(spellings(draw(st.sampled_from(fields))))
        redacted.add(key)
        subtrees.append(draw(planted({key: draw(FILLER)})))
    for _ in range(draw(st.integers(0, 3))):  # benign company: ordinary hosts and words
        subtrees.append(draw(planted(draw(benign_host() | BENIGN))))
    order = draw(st.permutations(range(len(subtrees))))
    args: dict[str, Any] = {f"{draw(KEYS)}{i}": subtrees[j] for i, j in enumerate(order)}
    if "rule" in plants:
        args[RULE_ARG] = "forbidden"
    elif draw(st.booleans()):
        args[RULE_ARG] = "fine"
    raw = json.dumps(args, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):
        raw = _escaped(raw)
    return {
        "policy": policy,
        "tool": tool,
        "raw": raw,
        "args": args,
        "plants": plants,
        "write": write,
        "allowed": allowed,
        "redacted": redacted,
    }


def _expected(case: dict[str, Any]) -> str:
    plants = case["plants"]
    if "path" in plants and case["write"]:
        return "DENY/SELF_MODIFY"
    if "rule" in plants:
        return "DENY/POLICY_BLOCK"
    if "host" in plants:
        return "DENY/EGRESS_BLOCK"
    if not case["allowed"]:
        return "DENY/DEFAULT_DENY"
    return "TRANSFORM/NONE" if "redacted" in plants else "ALLOW/NONE"


@pytest.mark.fak_theorem("D2.4", "D2.5", "D2.7")
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(calls())
def test_each_reading_decides_as_alone_in_the_one_walk(case: dict[str, Any]) -> None:
    k = Kernel(case["policy"])
    v = k.decide(ToolCall(case["tool"], case["raw"]))
    got = f"{k.kinds.name(v.kind)}/{k.reasons.name(v.reason)}"
    assert got == _expected(case), (case["raw"], v.claim)
    if got == "DENY/SELF_MODIFY":
        assert v.claim in GLOBS
    if v.kind == VerdictKind.TRANSFORM:
        present = _dropped(case["args"], case["redacted"])
        assert json.loads(v.repaired_args or "") == _without(case["args"], present)
        assert set(v.meta["redacted"].split(",")) == present
