"""How a kernel applies a policy and composes its chains.

D1: the chain a kernel folds for a call holds exactly the adjudicators added without a
scope or with the call's tool in their scope, lowest rank first and equal ranks in the
order they were added; the result side the same for admitters. The oracle is a stable
sort written here over the registrations the test made, and what recording adjudicators
and admitters saw.

D2.2 (the kernel's half): a kernel whose policy is swapped decides as a kernel built with
the new policy and the same host registrations. Its oracles are a model of the built-in
chain (ranks written out from the theorems), of the sources, schemas, argument rules,
allow list and rate budget the policy and host registrations give, and, for the screen
and grounding, a kernel built fresh with the new policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy, ToolCall, VerdictKind
from fak_core.admission import ScreenConfig
from fak_core.calls import Result, Status
from fak_core.policy import ToolDecl
from fak_core.ratelimit import RateLimit
from fak_core.rules import ArgumentRule
from fak_core.taint import Taint
from fak_core.verdicts import Verdict
from fak_core.view import CallView

TOOLS = ("get_a", "send_b", "tool_c")
OK_TOOL = "ok_tool"  # allowed by every policy here, with no schema and no rule

# ---------------------------------------------------------------- D1: chain composition


class _Recorder:
    """An adjudicator and admitter that notes its turn and has no opinion."""

    def __init__(self, label: int, log: list[int]) -> None:
        self.label = label
        self.log = log

    def adjudicate(self, view: CallView) -> Verdict:
        self.log.append(self.label)
        return Verdict.defer(f"r{self.label}")

    def admit(self, call: ToolCall, result: Result) -> Verdict:
        self.log.append(self.label)
        return Verdict.defer(f"r{self.label}")


_scopes = st.none() | st.frozensets(st.sampled_from(TOOLS), max_size=3)
_regs = st.lists(st.tuples(st.integers(0, 3), _scopes), max_size=6)


def _expected(regs: list[tuple[int, frozenset[str] | None]], tool: str) -> list[int]:
    """Labels of the registrations folded for ``tool``: stable by rank."""
    kept = [(rank, i) for i, (rank, scope) in enumerate(regs) if scope is None or tool in scope]
    return [i for _, i in sorted(kept, key=lambda t: t[0])]


@pytest.mark.fak_theorem("D1")
@settings(max_examples=60, deadline=None)
@given(_regs, _regs, st.sampled_from((*TOOLS, "other")))
def test_the_chains_hold_the_scoped_registrations_in_rank_order(
    pre: list[tuple[int, frozenset[str] | None]],
    post: list[tuple[int, frozenset[str] | None]],
    tool: str,
) -> None:
    k = Kernel(Policy(allow=TOOLS), builtin_chain=False)
    log: list[int] = []
    pre_impls = [_Recorder(i, log) for i in range(len(pre))]
    post_impls = [_Recorder(i, log) for i in range(len(post))]
    for impl, (rank, scope) in zip(pre_impls, pre, strict=True):
        k.add_adjudicator(impl, rank, tools=scope)
    for impl, (rank, scope) in zip(post_impls, post, strict=True):
        k.add_admitter(impl, rank, tools=scope)
    want = _expected(pre, tool)
    assert [pre_impls.index(a) for a in k.chain_for(tool)] == want  # type: ignore[arg-type]
    k.decide(ToolCall(tool, "{}", "t"))
    assert log == want
    log.clear()
    k.admit(ToolCall(tool, "{}", "t"), Result(Status.OK, "fine"))
    assert log == _expected(post, tool)


# ---------------------------------------------------------------- D2.2: a policy swap

SCHEMA_POLICY = {"required": ["p"]}
SCHEMA_HOST = {"required": ["h"]}
LIMITS = (None, RateLimit(1, 1000.0, "global"), RateLimit(2, 1000.0, "global"))
URL = "https://ok.example/p"
SECRET = "token sk-abcdefghij"
MARKER = "zzqmarker"
SOURCES = ("trusted_local", "untrusted")


@dataclass(frozen=True)
class Host:
    """What the host registers on both kernels: tools (source, schema), a screen config."""

    trusted: frozenset[str]
    schemas: frozenset[str]
    screen: ScreenConfig | None
    after: frozenset[str] = field(default_factory=frozenset)  # registered after the swap


def _policy(draw: st.DrawFn) -> Policy:
    allow = (*draw(st.frozensets(st.sampled_from(TOOLS))), OK_TOOL)
    rule_tool = draw(st.none() | st.sampled_from(TOOLS))
    rules = (
        ()
        if rule_tool is None
        else (ArgumentRule(rule_tool, "deny", {"required": ["bad"]}, "any", 0),)
    )
    grounds = draw(st.booleans())
    v2 = bool(rules) or grounds or draw(st.booleans())
    tools = {"send_b": ToolDecl("EGRESS", destinations=("/to",))} if grounds else {}
    screen = draw(
        st.none()
        | st.just(ScreenConfig(injection_markers=(MARKER,)))
        | st.just(ScreenConfig(page_out_bytes=256))
    )
    return Policy(
        version="fak-policy/v2" if v2 else "fak-policy/v1",
        allow=allow,
        rules=rules,
        tools=tools,
        gated_sinks=("EGRESS",) if v2 else ("EGRESS", "DESTRUCTIVE"),
        sources=draw(st.dictionaries(st.sampled_from(TOOLS), st.sampled_from(SOURCES))),
        schemas={t: SCHEMA_POLICY for t in draw(st.frozensets(st.sampled_from(TOOLS)))},
        rate_limit=draw(st.sampled_from(LIMITS)),
        secret_patterns=draw(st.sampled_from(((), ("sk-[a-z]{10}",)))),
        screen=screen,
    )


policies = st.composite(_policy)()


@st.composite
def hosts(draw: st.DrawFn) -> Host:
    tools = st.frozensets(st.sampled_from(TOOLS))
    screen = draw(st.none() | st.just(ScreenConfig(page_out_bytes=256)))
    return Host(draw(tools), draw(tools), screen, draw(tools))


def _register(k: Kernel, host: Host, tools: frozenset[str]) -> None:
    for t in sorted(tools):
        source = "trusted_local" if t in host.trusted else "untrusted"
        schema = SCHEMA_HOST if t in host.schemas else None
        k.register_tool(t, lambda a: "ran", schema=schema, source=source)


def _chain_names(k: Kernel, tool: str) -> list[str]:
    parts = {id(k.ladder): "preflight", id(k.sink_gate): "sink", id(k.floor): "floor"}
    parts[id(k.rules)] = "rules"
    if k.rate_limiter is not None:
        parts[id(k.rate_limiter)] = "rate"
    return [parts.get(id(a), "other") for a in k.chain_for(tool)]


def _model_chain(policy: Policy, builtin: bool) -> list[str]:
    """Rate limit 8, preflight 10, sink gate 30, rules 40, floor 100 (D9, D2.9, D2.2)."""
    if not builtin:
        return []
    rate = ["rate"] if policy.rate_limit is not None else []
    rules = ["rules"] if policy.rules else []
    return [*rate, "preflight", "sink", *rules, "floor"]


def _source(policy: Policy, host: Host, registered: frozenset[str], tool: str) -> Taint:
    name = policy.sources.get(tool)
    if name is None:
        name = "trusted_local" if tool in registered and tool in host.trusted else "untrusted"
    return Taint.TRUSTED if name == "trusted_local" else Taint.TAINTED


def _schema_ok(
    policy: Policy, host: Host, registered: frozenset[str], tool: str, args: dict[str, Any]
) -> bool:
    """The policy's schema replaces a host's registered before it was applied; a host's
    registered after it replaces the policy's (the last registration wins)."""
    if tool in host.after and tool in host.schemas:
        return "h" in args
    if tool in policy.schemas:
        return "p" in args
    if tool in registered and tool in host.schemas:
        return "h" in args
    return True


def _view(k: Kernel, tool: str, args: str, trace: str = "t") -> CallView:
    return k.view(ToolCall(tool, args, trace))


ARGS = ({}, {"p": 1}, {"h": 1}, {"p": 1, "h": 1, "bad": 1}, {"bad": 1})


def _check_tables(k: Kernel, policy: Policy, host: Host, registered: frozenset[str]) -> None:
    """The floor, schemas, rules and sources against the model of ``policy``."""
    import json

    for tool in TOOLS:
        for args in ARGS:
            text = json.dumps(args)
            floor = k.floor.adjudicate(_view(k, tool, text))
            assert (floor.kind == VerdictKind.ALLOW) == (tool in policy.allow), (tool, args)
            ladder = k.ladder.adjudicate(_view(k, tool, text))
            ok = _schema_ok(policy, host, registered, tool, args)
            assert (ladder.kind != VerdictKind.DENY) == ok, (tool, args)
            ruled = any(r.tool == tool for r in policy.rules) and "bad" in args
            rule = k.rules.adjudicate(_view(k, tool, text))
            assert (rule.kind == VerdictKind.DENY) == ruled, (tool, args)
        got, _ = k.admit(
            ToolCall(tool, "{}", "src-" + tool), Result(Status.OK, "hi", taint=Taint.TRUSTED)
        )
        assert got.taint == _source(policy, host, registered, tool), tool


def _budget(k: Kernel, limit: RateLimit | None, spent: int) -> None:
    """``OK_TOOL`` is allowed exactly as many more times as the budget left."""
    left = 3 if limit is None else max(0, limit.max_calls - spent)
    kinds = [k.decide(ToolCall(OK_TOOL, "{}", f"b{i}")).kind for i in range(left + 1)]
    if limit is None:
        assert set(kinds) == {VerdictKind.ALLOW}
        return
    assert kinds == [VerdictKind.ALLOW] * left + [VerdictKind.DENY]


def _screened(k: Kernel) -> list[tuple[int, int, Status]]:
    out = []
    for i, text in enumerate(("plain words", "A" * 300, SECRET, f"note {MARKER} here")):
        res, v = k.admit(ToolCall("tool_c", "{}", f"s{i}"), Result(Status.OK, text))
        out.append((v.kind, v.reason, res.status))
    return out


def _grounding(k: Kernel) -> tuple[bool, int, int]:
    """Whether a trusted result grounds a destination for a tainted session's sink."""
    k.ledger.raise_to("g", Taint.TAINTED)
    k.admit(ToolCall("get_a", "{}", "g"), Result(Status.OK, f"go to {URL}", taint=Taint.TRUSTED))
    v = k.sink_gate.adjudicate(_view(k, "send_b", f'{{"to": "{URL}"}}', "g"))
    return k.grounds_destinations, v.kind, v.reason


def _swap(
    start: Policy, first: Policy, second: Policy, host: Host, calls: int, builtin: bool
) -> None:
    """Host tools registered under ``start``, ``first`` applied and spent on, then
    ``second``; the swapped kernel is checked against the model and a fresh kernel."""
    k = Kernel(start, builtin_chain=builtin)
    if host.screen is not None:
        k.configure_screen(host.screen)
    _register(k, host, frozenset(TOOLS) - host.after)
    k.set_policy(first)
    spent = sum(
        k.decide(ToolCall(OK_TOOL, "{}", f"a{i}")).kind == VerdictKind.ALLOW for i in range(calls)
    )
    k.set_policy(second)
    _register(k, host, host.after)
    registered = frozenset(TOOLS)
    for tool in (*TOOLS, OK_TOOL):
        assert _chain_names(k, tool) == _model_chain(second, builtin), tool
    _check_tables(k, second, host, registered)
    fresh = Kernel(second, builtin_chain=builtin)
    if host.screen is not None:
        fresh.configure_screen(host.screen)
    _register(fresh, host, registered)
    assert _screened(k) == _screened(fresh)
    assert _grounding(k) == _grounding(fresh)
    if builtin:
        carried = first.rate_limit is not None and first.rate_limit == second.rate_limit
        _budget(k, second.rate_limit, spent if carried else 0)
        _budget(fresh, second.rate_limit, 0)


@pytest.mark.fak_theorem("D2.2")
@settings(max_examples=80, deadline=None)
@given(policies, policies, policies, hosts(), st.integers(0, 2), st.booleans())
def test_a_swapped_kernel_decides_as_one_built_with_the_new_policy(
    start: Policy, first: Policy, second: Policy, host: Host, calls: int, builtin: bool
) -> None:
    _swap(start, first, second, host, calls, builtin)


def _ruled(on: bool) -> tuple[ArgumentRule, ...]:
    return (ArgumentRule("send_b", "deny", {"required": ["bad"]}, "any", 0),) if on else ()


@pytest.mark.fak_theorem("D2.2")
@pytest.mark.parametrize("builtin", [True, False])
@pytest.mark.parametrize("rules", [(a, b) for a in (False, True) for b in (False, True)])
@pytest.mark.parametrize("limits", [(a, b) for a in LIMITS for b in LIMITS])
def test_every_limit_and_rules_transition_of_a_swap(
    limits: tuple[RateLimit | None, RateLimit | None], rules: tuple[bool, bool], builtin: bool
) -> None:
    """Every pair of rate limits (none, 1, 2 calls) and of rules (none, one) across a swap,
    after the host's schemas were overridden by one policy and the next drops them."""
    v2 = "fak-policy/v2"
    first = Policy(
        version=v2,
        allow=(*TOOLS, OK_TOOL),
        schemas={"get_a": SCHEMA_POLICY, "send_b": SCHEMA_POLICY},
        rules=_ruled(rules[0]),
        rate_limit=limits[0],
    )
    second = Policy(
        version=v2,
        allow=("get_a", OK_TOOL),
        schemas={"send_b": SCHEMA_POLICY},
        rules=_ruled(rules[1]),
        rate_limit=limits[1],
        sources={"tool_c": "trusted_local"},
    )
    host = Host(frozenset({"get_a"}), frozenset({"get_a", "send_b"}), None, frozenset({"tool_c"}))
    _swap(Policy(allow=(OK_TOOL,)), first, second, host, 2, builtin)


@pytest.mark.fak_theorem("D2.2")
def test_a_registered_tool_runs_and_a_non_callable_is_refused() -> None:
    k = Kernel(Policy(allow=("get_a",)))
    with pytest.raises(TypeError, match="get_a"):
        k.register_tool("get_a", "not a function")  # type: ignore[arg-type]
    assert k.tools() == []
    k.register_tool("get_a", lambda a: f"ran {sorted(a)}")
    res, v = k.syscall(ToolCall("get_a", '{"q": 1}', "r"))
    assert (v.kind, res.status, res.payload) == (VerdictKind.ALLOW, Status.OK, "ran ['q']")


SCREENS = (None, ScreenConfig(injection_markers=(MARKER,)), ScreenConfig(page_out_bytes=256))


@pytest.mark.fak_theorem("D2.2")
@pytest.mark.parametrize("host_screen", [None, ScreenConfig(page_out_bytes=256)])
@pytest.mark.parametrize("screens", [(a, b) for a in SCREENS for b in SCREENS])
@pytest.mark.parametrize("grounds", [(a, b) for a in (False, True) for b in (False, True)])
def test_every_grounding_and_screen_transition_of_a_swap(
    grounds: tuple[bool, bool],
    screens: tuple[ScreenConfig | None, ScreenConfig | None],
    host_screen: ScreenConfig | None,
) -> None:
    """Declared destinations on and off (v1 to v2 and back) and every pair of screen
    tables, with and without the host's screen settings, across a swap."""

    def policy(grounded: bool, screen: ScreenConfig | None, patterns: tuple[str, ...]) -> Policy:
        tools = {"send_b": ToolDecl("EGRESS", destinations=("/to",))} if grounded else {}
        return Policy(
            version="fak-policy/v2" if grounded else "fak-policy/v1",
            allow=(*TOOLS, OK_TOOL),
            tools=tools,
            gated_sinks=("EGRESS",) if grounded else ("EGRESS", "DESTRUCTIVE"),
            screen=screen,
            secret_patterns=patterns,
        )

    first = policy(grounds[0], screens[0], ())
    second = policy(grounds[1], screens[1], ("sk-[a-z]{10}",))
    host = Host(frozenset({"get_a"}), frozenset(), host_screen, frozenset({"tool_c"}))
    _swap(policy(not grounds[0], None, ("sk-[a-z]{10}",)), first, second, host, 0, True)
