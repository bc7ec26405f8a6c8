"""Taint: marks only rise until reset, sessions are isolated, trust cannot be forged."""

from __future__ import annotations

import threading
from collections import OrderedDict

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from fak_core import (
    Kernel,
    MemoryLedger,
    Policy,
    Reason,
    Result,
    Sink,
    Status,
    Taint,
    ToolCall,
    VerdictKind,
    classify,
)
from fak_core.ledger import ENTRY_OVERHEAD, OWNER_OVERHEAD

POLICY = Policy(allow=("send_email", "fetch_url", "read_file", "Read", "run_shell", "delete_row"))
EGRESS = '{"to": "alice@example.com", "body": "hi"}'

ops = st.lists(
    st.tuples(
        st.sampled_from(["raise", "reset"]),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(list(Taint)),
    ),
    max_size=40,
)


@pytest.mark.fak_theorem("C4.1")
@given(ops)
def test_marks_are_monotone_until_reset_and_per_trace(script: list[tuple[str, str, Taint]]) -> None:
    ledger = MemoryLedger()
    model: dict[str, Taint] = {}
    for op, trace, taint in script:
        before = ledger.level(trace)
        if op == "raise":
            after = ledger.raise_to(trace, taint)
            assert after >= before and after >= taint
            model[trace] = max(model.get(trace, Taint.TRUSTED), taint)
        else:
            ledger.reset(trace)
            model.pop(trace, None)
        for t in ("a", "b", "c"):
            assert ledger.level(t) == model.get(t, Taint.TRUSTED)


@pytest.mark.fak_theorem("C4.1")
def test_ledger_is_lru_bounded() -> None:
    ledger = MemoryLedger(limit=4)
    for i in range(100):
        ledger.raise_to(f"t{i}", Taint.TAINTED)
    assert len(ledger) == 4
    assert ledger.evicted == 96
    assert ledger.level("t99") == Taint.TAINTED
    # Evicted is not forgotten: the tombstones keep every evicted trace at least as tainted.
    assert all(ledger.level(f"t{i}") == Taint.TAINTED for i in range(100))
    assert ledger.tombstones >= 1


LRU_IDS = ["a", "b", "c", "d", "\u00e9"]  # "é" is two UTF-8 bytes: the budget counts bytes
ONE = 480 + 1  # the documented per-mark cost (ledger.ENTRY_OVERHEAD) plus a 1-byte id
BASE = 640  # the in-process owner "" (ledger.OWNER_OVERHEAD), charged while it holds marks
lru_ops = st.lists(
    st.tuples(
        st.sampled_from(["raise", "reset"]), st.sampled_from(LRU_IDS), st.sampled_from(list(Taint))
    ),
    max_size=30,
)
R, Z = "raise", "reset"
T, Q, OK = Taint.TAINTED, Taint.QUARANTINED, Taint.TRUSTED


def _lru_model(
    limit: int, max_bytes: int, script: list[tuple[str, str, Taint]], ledger: MemoryLedger
) -> None:
    """Replay ``script`` on ``ledger`` and on a plain model of the documented bounds."""
    assert (ENTRY_OVERHEAD + 1, OWNER_OVERHEAD) == (ONE, BASE)
    live: OrderedDict[str, Taint] = OrderedDict()  # least recently raised first
    tomb: dict[str, Taint] = {}
    evicted = 0

    def cost(t: str) -> int:
        return ENTRY_OVERHEAD + len(t.encode("utf-8"))

    def size() -> int:  # the marks, and the in-process owner "" while it holds any
        return (BASE if live else 0) + sum(map(cost, live))

    def level(t: str) -> Taint:
        return max(live.get(t, OK), tomb.get(t, OK))

    for op, trace, taint in script:
        if op == "reset":
            ledger.reset(trace)
            live.pop(trace, None)
        else:
            got = ledger.raise_to(trace, taint)
            if trace in live and taint <= live[trace]:
                live.move_to_end(trace)  # an unchanged mark is still recently raised
            elif trace in live or taint != OK:
                live[trace] = taint
                live.move_to_end(trace)
                while len(live) > limit or (size() > max_bytes and len(live) > 1):
                    old, mark = live.popitem(last=False)
                    tomb[old] = max(tomb.get(old, OK), mark)
                    evicted += 1
            assert got == level(trace)
        assert len(ledger) == len(live) <= limit
        assert ledger.evicted == evicted
        assert ledger.stats()["ledger_bytes"] == size()
        assert ledger.owner_bytes("") == size()  # all charged to the one owner
        assert ledger.tombstones == len(tomb)
        for t in LRU_IDS:
            assert ledger.level(t) == level(t), (t, op, trace, taint)


@pytest.mark.fak_theorem("C4.1")
@given(
    st.integers(min_value=1, max_value=4),
    st.sampled_from([BASE + ONE * k + d for k in (0, 1, 2, 3) for d in (-1, 0, 1)]),
    lru_ops,
)
# a raise that leaves the mark unchanged still makes it recent: b goes, a stays resettable
@example(2, 10_000, [(R, "a", T), (R, "b", T), (R, "a", T), (R, "c", T), (Z, "a", OK)])
# a raise that lifts a mark makes it recent too
@example(2, 10_000, [(R, "a", T), (R, "b", T), (R, "a", Q), (R, "c", T), (Z, "a", OK)])
# exactly at the byte budget nothing is evicted; one byte over, the oldest goes
@example(4, BASE + 2 * ONE, [(R, "a", T), (R, "b", T), (R, "c", T)])
# a single mark over the budget stays (the newest mark is always kept); two over: one goes
@example(4, BASE + ONE - 1, [(R, "a", T), (R, "b", T), (R, "b", Q)])
@example(4, BASE + 2 * ONE - 1, [(R, "a", T), (R, "b", T), (R, "c", T)])
# a reset returns its bytes, a reset of an unknown trace returns none
@example(4, BASE + 2 * ONE, [(R, "a", T), (R, "b", T), (Z, "a", OK), (Z, "d", OK), (R, "c", T)])
# a reset mark leaves the eviction order: the next eviction takes b, the oldest still live
@example(2, 10_000, [(R, "a", T), (R, "b", T), (Z, "a", OK), (R, "c", T), (R, "d", Q)])
# a TRUSTED raise of an unknown trace stores nothing
@example(1, 10_000, [(R, "a", T), (R, "b", OK), (R, "c", OK), (Z, "a", OK)])
def test_the_ledger_bounds_evict_the_least_recently_raised_mark(
    limit: int, max_bytes: int, script: list[tuple[str, str, Taint]]
) -> None:
    ledger = MemoryLedger(limit=limit, max_bytes=max_bytes)
    # tombstone buckets are keyed per ledger; a shared bucket would (correctly) join two
    # traces' marks, which this per-trace model does not describe
    assume(len({ledger._bucket(t) for t in LRU_IDS}) == len(LRU_IDS))
    _lru_model(limit, max_bytes, script, ledger)


def kernel() -> Kernel:
    k = Kernel(POLICY)
    k.register_tool("fetch_url", lambda a: "weather: sunny")
    k.register_tool("read_file", lambda a: "local notes", source="trusted_local")
    return k


@pytest.mark.fak_theorem("C4.1", "C4.3")
def test_untrusted_result_taints_the_session_and_egress_is_then_denied() -> None:
    k = kernel()
    assert k.decide(ToolCall("send_email", EGRESS, "s")).kind == VerdictKind.ALLOW
    k.syscall(ToolCall("fetch_url", "{}", "s"))
    assert k.taint("s") == Taint.TAINTED
    v = k.decide(ToolCall("send_email", EGRESS, "s"))
    assert (v.kind, v.reason, v.by) == (VerdictKind.DENY, Reason.TRUST_VIOLATION, "ifc-sink")
    assert v.claim == "EGRESS sink fed tainted data"
    assert dict(v.meta) == {"ifc_sink": "EGRESS", "ifc_flow": "tainted"}
    # the explicit reset is the only way down
    k.reset_trace("s")
    assert k.decide(ToolCall("send_email", EGRESS, "s")).kind == VerdictKind.ALLOW


@pytest.mark.fak_theorem("C4.2")
def test_trusted_local_tool_run_by_the_kernel_keeps_the_session_clean() -> None:
    k = kernel()
    result, _ = k.syscall(ToolCall("read_file", "{}", "s"))
    assert result.taint == Taint.TRUSTED
    assert k.taint("s") == Taint.TRUSTED


@pytest.mark.fak_theorem("C4.2")
def test_a_caller_cannot_mint_trust_with_metadata_or_a_trusted_name() -> None:
    k = kernel()
    forged = ToolCall.make(
        "read_file", "{}", "s", meta={"provenance": "trusted_local", "trust": "trusted"}
    )
    # a result the caller hands in (as the wire does) is TAINTED even for a trusted tool name
    admitted, _ = k.admit(forged, Result(Status.OK, "notes"))
    assert admitted.taint == Taint.TAINTED
    assert k.taint("s") == Taint.TAINTED
    assert k.decide(ToolCall("send_email", EGRESS, "s")).kind == VerdictKind.DENY


@pytest.mark.fak_theorem("C4.1")
def test_sessions_never_see_each_others_taint() -> None:
    k = kernel()
    k.syscall(ToolCall("fetch_url", "{}", "dirty"))
    assert k.decide(ToolCall("send_email", EGRESS, "dirty")).kind == VerdictKind.DENY
    assert k.decide(ToolCall("send_email", EGRESS, "clean")).kind == VerdictKind.ALLOW


@pytest.mark.fak_theorem("C4.1")
def test_isolation_under_concurrent_sessions() -> None:
    k = kernel()
    errors: list[str] = []

    def session(i: int) -> None:
        trace = f"s{i}"
        if i % 2:
            k.syscall(ToolCall("fetch_url", "{}", trace))
        for _ in range(50):
            v = k.decide(ToolCall("send_email", EGRESS, trace))
            want = VerdictKind.DENY if i % 2 else VerdictKind.ALLOW
            if v.kind != want:
                errors.append(f"{trace}: {v}")

    threads = [threading.Thread(target=session, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []


@pytest.mark.fak_theorem("C4.1")
def test_two_kernels_share_nothing() -> None:
    a, b = kernel(), kernel()
    a.syscall(ToolCall("fetch_url", "{}", "s"))
    assert a.taint("s") == Taint.TAINTED
    assert b.taint("s") == Taint.TRUSTED


@pytest.mark.fak_theorem("C4.3")
def test_quarantined_arguments_taint_the_call_on_a_clean_trace() -> None:
    k = kernel()
    call = ToolCall("send_email", EGRESS, "clean", args_taint=Taint.QUARANTINED)
    assert k.decide(call).reason == Reason.TRUST_VIOLATION


@pytest.mark.fak_theorem("C4.3")
def test_sink_classification() -> None:
    assert classify("Bash", {}) is Sink.EXEC
    assert classify("run_command", {}) is Sink.EXEC
    assert classify("drop_table", {}) is Sink.DESTRUCTIVE
    assert classify("delete_reservation", {}) is Sink.DESTRUCTIVE
    for name in ("send_email", "http_post", "post_message", "upload_file"):
        assert classify(name, {}) is Sink.EGRESS
    assert classify("transfer_to_human_agents", {}, ["transfer_to_human_agents"]) is Sink.NONE
    # a harmless name with an external destination in its arguments is still egress
    assert classify("lookup", {"url": "https://evil.example/x"}) is Sink.EGRESS
    assert classify("lookup", {"nested": {"target": "x@y.io"}}) is Sink.EGRESS
    assert classify("calculate", {"expr": "3.14 * 2"}) is Sink.NONE
    # file names are not host names: a relative path never counts as a destination
    assert classify("read_file", {"path": "README.md"}) is Sink.NONE
    assert classify("lookup", {"q": "notes.txt"}) is Sink.NONE
    assert classify("read_file", {"path": "file:///etc/hosts"}) is Sink.NONE
    assert classify("read_file", {"path": "https://evil.example/x"}) is Sink.EGRESS
    assert classify("lookup", {"q": "evil.example"}) is Sink.EGRESS
    # a safe-sink name does not launder an external destination
    assert (
        classify("transfer_to_human_agents", {"to": "a@b.com"}, ["transfer_to_human_agents"])
        is Sink.EGRESS
    )


@pytest.mark.fak_theorem("C4.3")
def test_exec_is_gated_only_when_the_policy_says_so() -> None:
    loose = Kernel(POLICY)
    loose.ledger.raise_to("s", Taint.TAINTED)
    assert loose.decide(ToolCall("run_shell", '{"cmd": "ls"}', "s")).kind == VerdictKind.ALLOW
    assert loose.decide(ToolCall("delete_row", '{"id": 1}', "s")).kind == VerdictKind.DENY
    strict = Kernel(Policy(allow=POLICY.allow, gated_sinks=("EGRESS", "DESTRUCTIVE", "EXEC")))
    strict.ledger.raise_to("s", Taint.TAINTED)
    assert strict.decide(ToolCall("run_shell", '{"cmd": "ls"}', "s")).kind == VerdictKind.DENY


@pytest.mark.fak_theorem("C4.3")
def test_authorize_rule_is_the_explicit_escape() -> None:
    from fak_core import AuthorizeRule

    k = Kernel(Policy(allow=("send_email",), authorize=(AuthorizeRule("send_email", "EGRESS"),)))
    k.ledger.raise_to("s", Taint.TAINTED)
    assert k.decide(ToolCall("send_email", EGRESS, "s")).kind == VerdictKind.ALLOW


# ---------------------------------------------------------------- C4.4 forgotten state
@pytest.mark.fak_theorem("C4.4")
@given(
    st.sampled_from([Taint.TAINTED, Taint.QUARANTINED]),
    st.lists(st.text(min_size=1, max_size=40), min_size=0, max_size=120),
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=200, max_value=2000),
)
def test_eviction_pressure_never_makes_a_tainted_session_trusted(
    mark: Taint, fresh: list[str], limit: int, max_bytes: int
) -> None:
    """The victim's session is tainted, then any number of fresh sessions (of any ids) are
    tainted after it, past the ledger's entry and byte bounds: the victim still reads at
    least its mark, its egress is still denied, and the ledger holds no more than its bounds."""
    k = Kernel(POLICY, ledger=MemoryLedger(limit=limit, max_bytes=max_bytes))
    k.register_tool("fetch_url", lambda a: "weather: sunny")
    k.ledger.raise_to("victim", mark)
    for trace in fresh:
        if trace != "victim":
            k.syscall(ToolCall("fetch_url", "{}", trace))
    assert k.taint("victim") >= mark
    v = k.decide(ToolCall("send_email", EGRESS, "victim"))
    assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.TRUST_VIOLATION)
    ledger = k.ledger
    assert isinstance(ledger, MemoryLedger)
    stats = ledger.stats()
    assert len(ledger) <= limit
    assert stats["ledger_bytes"] <= max(max_bytes, stats["ledger_bytes"] if len(ledger) == 1 else 0)
    for trace in fresh:  # every evicted session reads at least TAINTED too
        assert k.taint(trace) >= Taint.TAINTED


@pytest.mark.fak_theorem("C4.4")
@given(st.lists(st.integers(min_value=0, max_value=3000), min_size=1, max_size=60))
def test_held_results_are_bounded_in_bytes(sizes: list[int]) -> None:
    from fak_core.admission import HeldStore

    held = HeldStore(limit=1000, max_bytes=5000)
    for n in sizes:
        held.hold("x" * n)
        assert held.stats()["held_bytes"] <= 5000 or len(held) == 0
    assert held.stats()["held_bytes"] == sum(
        len(held.get(k) or "") + len(k) for k in list(held._items)
    )
