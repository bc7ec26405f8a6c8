"""The writer thread commits every queued row, in order, and stops when closed (C1.2 (e)).

Fast witnesses of ``Journal._drain``: a short commit timeout turns a writer that never
commits into a quick failure, and every journal is closed in ``finally`` so a broken writer
gets its stop marker. A second connection holding SQLite's write lock keeps the writer busy
on its first row while the others queue up, so the writer takes them from a full queue,
and ``close`` is called while the writer is busy as well as while it is idle. The expected
rows are the ones the test recorded, read back through ``read_rows`` and recomputed with
``hashlib``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core.journal import GENESIS, Journal, read_rows
from tests.journal.legacy import numbered, write_old_journal

FIELDS = ("seq", "ts", "event", "trace", "tool", "args_digest", "verdict", "reason", "by")
TIMEOUT = 1.0  # seconds a witness waits for a commit: the writer needs milliseconds


def _row(trace: str) -> dict[str, str]:
    return {
        "event": "decide",
        "trace": trace,
        "tool": "t",
        "args_digest": "d",
        "verdict": "ALLOW",
        "reason": "",
        "by": "k",
    }


def _shut(j: Journal) -> None:
    """Stop ``j``'s writer and close it, waiting a few seconds at most: a broken writer that
    never stops is left behind rather than waited for."""
    j._queue.put(None)
    j._thread.join(timeout=3 * TIMEOUT)
    if not j._thread.is_alive():
        j.close()


@contextmanager
def _journal(batch: int) -> Iterator[tuple[Journal, Path]]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "j.db"
        j = Journal(path, batch=batch, commit_timeout=TIMEOUT)
        try:
            yield j, path
        finally:
            _shut(j)


@contextmanager
def _write_lock(path: Path) -> Iterator[None]:
    """Hold SQLite's write lock from a second connection while the block runs."""
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


def _check(path: Path, traces: list[str]) -> None:
    """The file holds exactly ``traces``, in order, numbered 1..n and chained."""
    rows = list(read_rows(path))
    assert [r["trace"] for r in rows] == traces
    assert [r["seq"] for r in rows] == list(range(1, len(traces) + 1))
    prev = GENESIS
    for r in rows:
        body = json.dumps({k: r[k] for k in FIELDS}, sort_keys=True, separators=(",", ":"))
        assert r["prev_hash"] == prev
        prev = hashlib.sha256((prev + body).encode("utf-8")).hexdigest()
        assert r["hash"] == prev


@pytest.mark.fak_theorem("C1.2")
@settings(max_examples=8, deadline=None)
@given(batch=st.integers(1, 4), n=st.integers(1, 9))
def test_each_row_is_committed_in_order_when_synced(batch: int, n: int) -> None:
    with _journal(batch) as (j, path):
        traces = [f"r{i}" for i in range(n)]
        for t in traces:
            j.record_fields(_row(t))
            assert j.sync() >= traces.index(t) + 1
        _check(path, traces)


@pytest.mark.fak_theorem("C1.2")
@settings(max_examples=6, deadline=None)
@given(batch=st.integers(1, 4), queued=st.integers(1, 10))
def test_rows_queued_while_the_writer_is_busy_are_all_committed(batch: int, queued: int) -> None:
    with _journal(batch) as (j, path):
        j.record_fields(_row("warm"))
        j.sync()
        traces = ["warm", "first", *(f"q{i}" for i in range(queued))]
        with _write_lock(path):
            j.record_fields(_row("first"))
            time.sleep(0.02)  # the writer takes "first" and waits for the lock
            for t in traces[2:]:
                j.record_fields(_row(t))
        assert j.sync() == len(traces)
        _check(path, traces)


@pytest.mark.fak_theorem("C1.2")
@pytest.mark.parametrize("busy", [False, True])
@pytest.mark.parametrize("batch", [1, 3])
def test_close_commits_what_was_queued_and_stops_the_writer(busy: bool, batch: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "j.db"
        j = Journal(path, batch=batch, commit_timeout=TIMEOUT)
        traces = [f"c{i}" for i in range(5)]
        closer = threading.Thread(target=j.close, daemon=True)
        try:
            if busy:
                with _write_lock(path):
                    for t in traces:
                        j.record_fields(_row(t))
                    time.sleep(0.02)
                    closer.start()  # the stop marker queues behind the rows
                    time.sleep(0.02)
            else:
                for t in traces:
                    j.record_fields(_row(t))
                j.sync()
                closer.start()
            closer.join(timeout=3 * TIMEOUT)
            assert not closer.is_alive(), "close did not return"
            assert not j._thread.is_alive(), "the writer thread still runs"
        finally:
            _shut(j)
        _check(path, traces)


@pytest.mark.fak_theorem("C1.2")
def test_the_journal_is_a_wal_file_and_close_lets_go_of_it() -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "j.db"
        j = Journal(path, commit_timeout=TIMEOUT)
        try:
            j.record_fields(_row("a"))
            j.sync()
            reader = sqlite3.connect(path)
            try:
                assert reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            finally:
                reader.close()
            j.close()
        finally:
            _shut(j)
        # the last connection to a WAL database folds the log back and removes it
        assert sorted(p.name for p in Path(d).iterdir()) == ["j.db"]
        _check(path, ["a"])


def _legacy(path: Path, n: int) -> str:
    """A journal written before replicas (no replica column); the last row's hash."""
    rows = numbered(n, lambda i: {"ts": "2026-01-01T00:00:00", **_row(f"old{i}")})
    return write_old_journal(path, rows)[-1]


@pytest.mark.fak_theorem("C1.2")
def test_a_journal_from_before_replicas_is_continued() -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "old.db"
        _legacy(path, 2)
        with _journal_at(path) as j:
            j.record_fields(_row("new"))
            j.sync()
        _check(path, ["old1", "old2", "new"])
        assert [r["replica"] for r in read_rows(path)] == ["", "", ""]


@contextmanager
def _journal_at(path: Path) -> Iterator[Journal]:
    j = Journal(path, commit_timeout=TIMEOUT)
    try:
        yield j
    finally:
        _shut(j)
