"""C1.2 (c), (d) and (e) at their edges: a failure wakes a ``sync`` already waiting, a
writer that stops on any error fails the journal closed, and a journal's settings are
refused before any file is made, ``rotate_bytes`` below 0 among them.

The failure is real: a second connection holds SQLite's write lock while a row is queued
and a ``sync`` waits for it with a long timeout, then installs a trigger that refuses every
insert and lets go, so the writer's commit fails with an SQLite error. The expectation is
the theorem's: that ``sync`` raises long before its own timeout, and the journal's gate
denies from then on. The settings are checked against the theorem's list by hand: each
refusal is a ``ValueError`` naming the setting, and the directory stays empty.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fak_core import Kernel, Policy, ToolCall, VerdictKind
from fak_core.journal import Journal, JournalError

ROW = {"event": "decide", "trace": "t", "tool": "x", "verdict": "ALLOW", "by": "test"}
WAIT = 30.0  # the waiting sync's own timeout: far longer than the test may take


def _fresh(tmp_path: Path) -> Path:
    """A new directory on every run: proof mode re-runs a witness with the same tmp_path."""
    return Path(tempfile.mkdtemp(dir=tmp_path))


def _until(predicate: Callable[[], bool], limit: float = 5.0) -> None:
    end = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.005)


def _waiting(j: Journal) -> bool:
    """Someone waits on the journal's commit condition (the sync started below)."""
    return len(getattr(j._cond, "_waiters", ())) > 0


@pytest.mark.fak_theorem("C1.2")
def test_a_failure_wakes_a_sync_that_waits_for_a_commit(tmp_path: Path) -> None:
    path = _fresh(tmp_path) / "j.db"
    k = Kernel(Policy(allow=("x",)))
    k.register_tool("x", lambda a: "ran")
    j = Journal(path, commit_timeout=WAIT)
    j.attach(k)
    hold = sqlite3.connect(path, isolation_level=None, timeout=10)
    outcome: list[tuple[str, float]] = []

    def wait() -> None:
        try:
            j.sync(WAIT)
        except JournalError as exc:
            outcome.append((str(exc), time.monotonic()))
        else:
            outcome.append(("returned", time.monotonic()))

    waiter = threading.Thread(target=wait, daemon=True)
    try:
        assert j.sync() == 0
        hold.execute("BEGIN IMMEDIATE")  # no commit can happen now
        j.record_fields(ROW)
        waiter.start()
        _until(lambda: _waiting(j))
        hold.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON decisions "
            "BEGIN SELECT RAISE(ABORT, 'the disk refused the write'); END"
        )
        failed_at = time.monotonic()
        hold.execute("COMMIT")  # the writer gets the lock, and its insert fails
        waiter.join(WAIT / 3)
        assert outcome, "the waiting sync was not woken by the failure"
        ((message, woke),) = outcome
        assert message != "returned", "sync acknowledged a row that was never committed"
        assert "unavailable" in message
        assert woke - failed_at < WAIT / 3
        result, verdict = k.syscall(ToolCall("x", "{}", "t2"))
        assert verdict.kind == VerdictKind.DENY and verdict.by == "journal"
        assert result.payload != "ran"
        with pytest.raises(JournalError):
            j.sync(0.5)
    finally:
        with contextlib.suppress(sqlite3.Error):
            hold.execute("ROLLBACK")
        hold.close()
        j.close()


@pytest.mark.fak_theorem("C1.2")
def test_a_writer_that_stops_on_any_error_fails_the_journal_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only an SQLite error: whatever escapes the writer's loop (here a fault injected
    into ``_drain`` before the journal starts its thread) fails the journal closed at once,
    naming the writer, instead of leaving a dead thread behind a journal that looks open."""

    def broken_drain(self: Journal) -> None:
        raise RuntimeError("an error no commit expects")

    monkeypatch.setattr(Journal, "_drain", broken_drain)
    k = Kernel(Policy(allow=("x",)))
    k.register_tool("x", lambda a: "ran")
    j = Journal(_fresh(tmp_path) / "j.db", commit_timeout=WAIT)
    j.attach(k)
    try:
        _until(lambda: j.error is not None)
        assert j.error is not None and "the writer stopped" in j.error
        assert "an error no commit expects" in j.error
        started = time.monotonic()
        with pytest.raises(JournalError):
            j.sync(WAIT)
        assert time.monotonic() - started < WAIT / 3, "sync waited for a writer that is gone"
        result, verdict = k.syscall(ToolCall("x", "{}", "t"))
        assert verdict.kind == VerdictKind.DENY and verdict.by == "journal"
        assert result.payload != "ran"
    finally:
        j.close()


_REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"rotate_bytes": -1}, "rotate_bytes"),
    ({"rotate_bytes": -(2**40)}, "rotate_bytes"),
    ({"rotate_bytes": -1, "durability": "normal"}, "0 \\(never rotate\\) or a positive"),
    ({"durability": "FULL"}, "durability"),
    ({"commit_timeout": -1e-9}, "commit_timeout"),
    ({"max_backlog_bytes": -5}, "max_backlog_bytes"),
]


@pytest.mark.fak_theorem("C1.2")
@pytest.mark.parametrize(("settings", "named"), _REFUSED)
def test_a_setting_out_of_range_is_refused_before_any_file_is_made(
    tmp_path: Path, settings: dict[str, Any], named: str
) -> None:
    where = _fresh(tmp_path) / "missing"
    with pytest.raises(ValueError, match=named):
        Journal(where / "j.db", **settings)
    assert not where.exists()


@pytest.mark.fak_theorem("C1.2")
@pytest.mark.parametrize("rotate_bytes", [0, 1, 4096, 2**40])
def test_rotate_bytes_of_zero_or_more_opens(tmp_path: Path, rotate_bytes: int) -> None:
    path = _fresh(tmp_path) / "j.db"
    j = Journal(path, rotate_bytes=rotate_bytes)
    try:
        j.record_fields(ROW)
        assert j.sync() == 1
        assert j.rotate_bytes == rotate_bytes
    finally:
        j.close()
    assert path.exists()
