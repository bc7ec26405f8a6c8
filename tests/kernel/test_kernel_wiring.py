"""How a kernel takes what a host hands it: plain functions, extensions, built calls.

D1: a plain function added to the pre-call chain is an adjudicator answering what it
returns, and one added to the result side an admitter; anything that is neither an
adjudicator (admitter) nor callable is refused with ``TypeError`` and nothing is added.
The oracle is the verdict the test's own function returned and the default written out
from D1 (an empty pre-call chain is DEFAULT_DENY, the result side defaults to ALLOW).

A8: an extension registered through the kernel lands in that kernel's registries and the
registration answers its code (a sink class its name). The oracle is the values the test
registered, read back through the registries.

C4.2: the builders a host (and the gateway) uses, ``ToolCall.make`` and ``Result.make``,
label what they build TAINTED unless told otherwise, so a result built with them and handed
in leaves the session TAINTED whatever its metadata or tool name claims.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy, Reason, Result, Taint, ToolCall, Verdict, VerdictKind
from fak_core.calls import Status
from fak_core.view import CallView

_KINDS = st.sampled_from(
    [VerdictKind.ALLOW, VerdictKind.DENY, VerdictKind.QUARANTINE, VerdictKind.DEFER]
)
_NOT_CALLABLE: list[object] = [None, 42, "floor", b"x", ("a",), {"adjudicate": 1}, object()]


def _verdict(kind: VerdictKind) -> Verdict:
    if kind is VerdictKind.DENY:
        return Verdict.deny(Reason.DEFAULT_DENY, "wiring", "refused by the test")
    if kind is VerdictKind.QUARANTINE:
        return Verdict.quarantine(Reason.TRUST_VIOLATION, "wiring")
    return Verdict(kind, by="wiring")


def _bare() -> Kernel:
    return Kernel(Policy(allow=("t",)), builtin_chain=False)


@pytest.mark.fak_theorem("D1")
@settings(max_examples=20, deadline=None)
@given(kind=_KINDS)
def test_a_plain_function_is_an_adjudicator_answering_its_return(kind: VerdictKind) -> None:
    k = _bare()
    seen: list[str] = []

    def fn(view: CallView) -> Verdict:
        seen.append(view.tool)
        return _verdict(kind)

    k.add_adjudicator(fn, 5)
    v = k.decide(ToolCall("t", "{}", "s"))
    assert seen == ["t"]
    # D1: a DEFER alone is the default deny; anything else is the function's own answer
    expected = VerdictKind.DENY if kind is VerdictKind.DEFER else kind
    assert v.kind == expected
    if kind is not VerdictKind.DEFER:
        assert v.by == "wiring"


@pytest.mark.fak_theorem("D1")
@settings(max_examples=20, deadline=None)
@given(kind=_KINDS)
def test_a_plain_function_is_an_admitter_answering_its_return(kind: VerdictKind) -> None:
    k = _bare()
    seen: list[str] = []

    def fn(call: ToolCall, result: Result) -> Verdict:
        seen.append(result.payload)
        return _verdict(kind)

    k.add_admitter(fn, 5)
    _, v = k.admit(ToolCall("t", "{}", "s"), Result(Status.OK, "payload"))
    assert seen == ["payload"]
    # the result side starts from ALLOW; DEFER is no opinion
    expected = VerdictKind.ALLOW if kind is VerdictKind.DEFER else kind
    assert v.kind == expected


@pytest.mark.fak_theorem("D1")
@pytest.mark.parametrize(
    "obj", _NOT_CALLABLE, ids=lambda o: "object()" if type(o) is object else repr(o)
)
def test_what_is_neither_adjudicator_nor_function_is_refused(obj: object) -> None:
    k = _bare()
    with pytest.raises(TypeError):
        k.add_adjudicator(obj, 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        k.add_admitter(obj, 5)  # type: ignore[arg-type]
    assert k.chain_for("t") == ()
    # nothing was added: the pre-call chain is still empty (default deny), the result
    # side still admits by default
    assert k.decide(ToolCall("t", "{}", "s")).kind == VerdictKind.DENY
    _, v = k.admit(ToolCall("t", "{}", "s"), Result(Status.OK, "payload"))
    assert v.kind == VerdictKind.ALLOW


@pytest.mark.fak_theorem("A8")
@settings(max_examples=30, deadline=None)
@given(
    code=st.integers(1025, 1 << 16),
    rank=st.integers(0, 100),
    fallback=st.sampled_from([VerdictKind.DENY, VerdictKind.ALLOW, VerdictKind.DEFER]),
    suffix=st.text("ABCXYZ019_", min_size=1, max_size=6),
)
def test_extensions_registered_through_the_kernel_land_in_its_registries(
    code: int, rank: int, fallback: VerdictKind, suffix: str
) -> None:
    k = Kernel()
    name = "EXT" + suffix
    assert k.register_kind(code, name, rank, fallback) == code
    assert (k.kinds.name(code), k.kinds.rank(code), k.kinds.fallback(code)) == (
        name,
        rank,
        fallback,
    )
    assert k.register_reason(code, name) == code
    assert k.reasons.code(name) == code and k.reasons.name(code) == name
    assert k.register_sink_class(name) == name
    assert name in k.sink_classes and k.sink_classes.names()[-1] == name
    # another kernel shares nothing
    assert name not in Kernel().sink_classes


@pytest.mark.fak_theorem("C4.2")
@pytest.mark.parametrize("tool", ["Read", "cat", "echo"])
def test_built_calls_and_results_are_tainted_unless_told(tool: str) -> None:
    k = Kernel(Policy(allow=(tool,)))
    trusted = {"provenance": "trusted_local", "taint": "TRUSTED"}
    call = ToolCall.make(tool, "{}", "s", meta=trusted)
    result = Result.make(payload="plain text", meta=trusted)
    assert call.args_taint == Taint.TAINTED and result.taint == Taint.TAINTED
    k.admit(call, result)
    assert k.taint("s") == Taint.TAINTED


@pytest.mark.fak_theorem("D1.2")
def test_unsubscribing_takes_out_exactly_that_subscriber() -> None:
    k = Kernel(Policy(allow=("t",)))
    k.register_tool("t", lambda a: "ok")
    first: list[str] = []
    second: list[str] = []
    undo_first = k.subscribe(lambda e: first.append(e.kind.name))
    undo_second = k.subscribe(lambda e: second.append(e.kind.name))
    assert callable(undo_first) and callable(undo_second)
    k.syscall(ToolCall("t", "{}", "s"))
    assert first == second and "DISPATCH" in first
    undo_first()
    undo_first()  # a second call takes out nothing more
    seen = len(second)
    k.syscall(ToolCall("t", "{}", "s"))
    assert len(first) == seen and len(second) > seen
    undo_second()
    k.syscall(ToolCall("t", "{}", "s"))
    assert len(second) == 2 * seen


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("allowed", [True, False])
def test_every_settling_adjudicator_is_told_once(allowed: bool) -> None:
    k = Kernel(Policy(allow=("t",) if allowed else ()))
    k.register_tool("t", lambda a: "ok")
    told: list[tuple[int, bool]] = []

    def settling(n: int) -> Callable[[CallView], Verdict]:
        def adj(view: CallView) -> Verdict:
            view.on_settle(lambda runs: told.append((n, runs)))
            return Verdict.defer("settling")

        return adj

    for n in range(3):
        k.add_adjudicator(settling(n), 5)
    _, v = k.syscall(ToolCall("t", "{}", "s"))
    assert (v.kind == VerdictKind.ALLOW) is allowed
    assert sorted(told) == [(n, allowed) for n in range(3)]


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("args", ['{"a": [1, 2]}', "{}", "[1]", "{", ""])
def test_a_view_parses_its_arguments_once(args: str) -> None:
    view = CallView(ToolCall("t", args, "s"))
    assert not view.parsed
    first = view.args()
    assert view.parsed
    second = view.args()
    assert second is first  # the same parse, whoever asks
    if first is None:
        assert view.error is not None
