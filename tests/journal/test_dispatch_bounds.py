"""C1.4 at its edges: every sequence of dispatch gate answers, the byte bounds to the
byte, the refusal row, and tickets.

The oracles are this file's own: which gate answers first, the row size the theorem
states (stored fields in UTF-8 plus 256 bytes), the rows read through our own connection.
"""

from __future__ import annotations

import hashlib
import itertools
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from fak_core import Event, EventKind, Kernel, Policy, Reason, Status
from fak_core.calls import ToolCall
from fak_core.journal import Journal, JournalError, request_scope
from fak_core.verdicts import Verdict, VerdictKind
from tests.journal.faults import refuse_inserts
from tests.journal.test_journal import fresh

ROW_OVERHEAD = 256
LONG = "m" * 700

#: what a dispatch gate may answer
ANSWERS: dict[str, Any] = {
    "pass": None,
    "deny": Verdict.deny(Reason.POLICY_BLOCK, "g-deny", claim="no"),
    "quarantine": Verdict.quarantine(Reason.TRUST_VIOLATION, "g-q"),
    "allow": Verdict.allow("g-allow"),
    "raise": RuntimeError(LONG),
}


def _expected(answers: tuple[str, ...]) -> tuple[int, tuple[str, str, str] | None]:
    """How many gates are asked, and the refusal as (reason, by, claim prefix)."""
    for i, a in enumerate(answers):
        if a == "pass":
            continue
        if a == "raise":
            return i + 1, ("DEFAULT_DENY", "kernel", "a dispatch gate raised RuntimeError: ")
        reason = {"deny": "POLICY_BLOCK", "quarantine": "TRUST_VIOLATION", "allow": "DEFAULT_DENY"}[
            a
        ]
        return i + 1, (
            reason,
            f"g-{a}" if a != "quarantine" else "g-q",
            "no" if a == "deny" else "",
        )
    return len(answers), None


@pytest.mark.fak_theorem("C1.4")
@pytest.mark.parametrize("subscribe", [False, True])
def test_every_sequence_of_dispatch_gate_answers(subscribe: bool) -> None:
    """Up to three gates, each passing, denying, answering another kind (it is made a
    DENY) or raising: the first refusal is the call's DENY, later gates are not asked, the
    tool runs only when every gate passed."""
    for n in range(4):
        for answers in itertools.product(ANSWERS, repeat=n):
            k = Kernel(Policy(allow=("get_a",)))
            ran: list[int] = []
            k.register_tool("get_a", ran.append)
            asked: list[int] = []

            def gate(i: int, answer: Any, asked: list[int] = asked) -> Any:
                def g(call: ToolCall, verdict: Verdict) -> Verdict | None:
                    asked.append(i)
                    if isinstance(answer, Exception):
                        raise answer
                    return answer  # type: ignore[no-any-return]

                return g

            for i, a in enumerate(answers):
                k.add_dispatch_gate(gate(i, ANSWERS[a]))
            events: list[Event] = []
            if subscribe:
                k.subscribe(events.append)
            result, v = k.syscall(ToolCall("get_a", "{}", "t"))
            n_asked, refusal = _expected(answers)
            assert asked == list(range(n_asked)), answers
            if refusal is None:
                assert (ran, result.status, v.kind) == ([{}], Status.OK, VerdictKind.ALLOW), answers
                assert k.counters.denies == 0
                continue
            reason, by, claim = refusal
            assert ran == [] and result.status is Status.ERROR, answers
            assert (v.kind, k.reasons.name(v.reason), v.by) == (VerdictKind.DENY, reason, by), (
                answers,
                v,
            )
            assert v.claim.startswith(claim), (answers, v.claim)
            if answers[n_asked - 1] == "raise":  # bounded: a verdict's claim is 256 characters
                assert len(v.claim) == 256, len(v.claim)
            assert result.meta["reason"] == reason and k.counters.denies == 1, answers
            if subscribe:
                denies = [e for e in events if e.kind is EventKind.DENY]
                assert [e.verdict for e in denies] == [v], answers


# ----------------------------------------------------------------------------- bounds
def fields(n: int, fill: str = "x") -> dict[str, str]:
    """A row whose stored size is 256 + n bytes: n ASCII characters spread over the seven
    stored fields, none over the 256 characters a field keeps whole."""
    keys = ("event", "trace", "tool", "args_digest", "verdict", "reason", "by")
    assert n <= 256 * len(keys)
    return {key: fill * min(256, max(0, n - 256 * i)) for i, key in enumerate(keys)}


@pytest.mark.fak_theorem("C1.4")
@pytest.mark.parametrize("bound", [ROW_OVERHEAD + 1, 1000, 2000])
def test_the_request_bound_is_exact_to_the_byte(tmp_path: Path, bound: int) -> None:
    tmp_path = fresh(tmp_path)  # proof mode re-runs a witness in the same tmp_path
    j = Journal(tmp_path / "j.db", max_request_bytes=bound)
    first = bound - ROW_OVERHEAD - 1  # a row of bound - 1 bytes, then one of exactly 1 more
    tickets = []
    with request_scope() as receipt:
        tickets.append(j.record_fields(fields(first)))
        assert receipt.queued_bytes == bound - 1
        with pytest.raises(
            JournalError,
            match=f"^decision journal unavailable for this request: its rows are over the "
            f"{bound}-byte limit per request; send fewer tool calls or tool results in one "
            "request$",
        ):
            j.record_fields(fields(1))  # 257 bytes: over
        assert receipt.refused is not None
        with pytest.raises(JournalError):  # refused once, refused for good
            j.record_fields(fields(0))
        with pytest.raises(JournalError):
            j.sync()
    with request_scope() as receipt:  # exactly at the bound is allowed
        tickets.append(j.record_fields(fields(bound - ROW_OVERHEAD)))
        assert receipt.refused is None and receipt.queued_bytes == bound
        assert j.sync() == 2
    tickets.append(j.record_fields(fields(1792, "é")))  # no scope: never refused
    assert tickets == [1, 2, 3] and j.sync() == 3
    j.close()


@pytest.mark.fak_theorem("C1.4")
def test_the_backlog_bound_is_exact_to_the_byte(tmp_path: Path) -> None:
    tmp_path = fresh(tmp_path)  # proof mode re-runs a witness in the same tmp_path
    path = tmp_path / "j.db"
    backlog = 5000
    j = Journal(path, max_backlog_bytes=backlog, commit_timeout=0.2)
    j.sync()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # nothing commits: the backlog only grows
    try:
        for _ in range(2):  # outside a scope: 2 * (256 + 1792) = 4096 bytes
            j.record_fields(fields(1792, "f"))
        assert j.queued_bytes == 4096
        with request_scope() as receipt:  # exactly up to the bound: queued
            j.record_fields(fields(backlog - 4096 - ROW_OVERHEAD))
            assert receipt.refused is None and j.queued_bytes == backlog
        with request_scope() as receipt:  # one byte over: refused
            with pytest.raises(
                JournalError,
                match=f"^decision journal unavailable: over {backlog} bytes of rows are waiting "
                "to be committed; retry shortly$",
            ):
                j.record_fields(fields(0))
            assert j.queued_bytes == backlog
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert j.sync(timeout=10) == 3 and j.queued_bytes == 0
    j.close()


@pytest.mark.fak_theorem("C1.4")
@pytest.mark.parametrize("how", ["locked", "refused-scope", "failed"])
def test_a_refused_dispatch_is_recorded(tmp_path: Path, how: str) -> None:
    """The tool does not run, the answer is DENY/JOURNAL_DOWN by the journal naming the
    tool, and (unless nothing can be written any more) a dispatch row records it."""
    tmp_path = fresh(tmp_path)  # proof mode re-runs a witness in the same tmp_path
    path = tmp_path / "j.db"
    k = Kernel(Policy(allow=("get_a",)))
    ran: list[int] = []
    k.register_tool("get_a", lambda a: ran.append(1) or "ok")
    j = Journal(path, commit_timeout=0.1, max_request_bytes=1000)
    j.attach(k)
    j.sync()
    call = ToolCall("get_a", '{"n": 1}', "victim")
    if how == "locked":
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            _, v = k.syscall(call)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
    elif how == "refused-scope":  # refused between the decision and the dispatch
        with request_scope() as receipt:
            authorized, allow, runnable = k.authorize(call)
            assert runnable
            receipt.refused = "refused for the test"
            _, v = k.run_authorized(authorized, allow)
    else:
        refuse_inserts(path)
        j.record_fields(fields(6))
        with pytest.raises(JournalError):
            j.sync(timeout=5)
        with pytest.raises(JournalError, match="unavailable"):
            j.record_fields(fields(5))  # a failed journal queues nothing more
        _, v = k.syscall(call)
    assert ran == []
    assert (v.kind, k.reasons.name(v.reason), v.by) == (VerdictKind.DENY, "JOURNAL_DOWN", "journal")
    if how != "failed":
        assert "'get_a' did not run" in v.claim, v.claim
        j.sync(timeout=5)
    j.close()
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT event, trace, tool, args_digest, verdict, reason, by FROM decisions "
            "WHERE event = 'dispatch'"
        ).fetchall()
    if how == "failed":
        assert rows == []
    else:
        wanted = (
            "dispatch",
            "victim",
            "get_a",
            "sha256:" + hashlib.sha256(b'{"n": 1}').hexdigest(),
        )
        assert rows == [(*wanted, "DENY", "JOURNAL_DOWN", "journal")], rows
