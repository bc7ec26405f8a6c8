"""The journal under hostile conditions (theorems C1.3, C1.4 in theorems/journal.md):
rotation while another process reads, and the decision path when a commit fails, times
out, or a request floods the writer.

The oracles read the SQLite files directly (a separate connection, a separate process for
the reader), never through the journal's own bookkeeping."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from fak_core import Result, Status, ToolCall
from fak_core.cli import main as fak
from fak_core.gateway.state import GatewayState
from fak_core.journal import (
    FIELD_CHARS,
    JournalError,
    read_rows,
    request_scope,
    verify_files,
)
from tests.journal.faults import refuse_inserts
from tests.journal.test_journal import REPLICAS, fresh, journaled

READER = textwrap.dedent(
    """
    import sqlite3, sys
    conn = None
    for line in sys.stdin:
        cmd, _, arg = line.rstrip("\\n").partition(" ")
        try:
            if cmd == "hold" and conn is None:
                conn = sqlite3.connect(f"file:{arg}?mode=ro", uri=True, isolation_level=None)
                conn.execute("BEGIN")
                n = conn.execute("SELECT count(*) FROM decisions").fetchone()[0]
                reply = f"held {n}"
            elif cmd == "release" and conn is not None:
                held, conn = conn, None
                try:
                    held.execute("COMMIT")
                finally:
                    held.close()
                reply = "released"
            else:
                reply = "noop"
        except Exception as exc:  # a failure is an answer: the reader lives on
            if conn is not None:
                conn.close()
                conn = None
            reply = f"error {type(exc).__name__}: {exc}"
        print(" ".join(reply.split()), flush=True)
    """
)
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


class Reader:
    """Another process that opens the journal and holds a read transaction on it.

    It lives for the module, across the proof run's mutant re-runs: one that ends it (a
    mutant can break the journal under it) must not fail the runs after it on the real
    code through a dead pipe, so a reader found dead is started again."""

    def __init__(self) -> None:
        self.proc = self._start()

    @staticmethod
    def _start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", READER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def _say(self, line: str) -> str:
        """Send one command and return the reply; empty if the reader died on it."""
        if self.proc.poll() is not None:
            self.close()
            self.proc = self._start()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return ""
        return self.proc.stdout.readline().strip()

    def hold(self, path: Path) -> None:
        reply = self._say(f"hold {path}")
        assert reply.startswith("held ") or reply == "noop", (
            f"the reader could not hold a read transaction on {path.name}: {reply or 'it died'}"
        )

    def release(self) -> None:
        self._say("release")

    def close(self) -> None:
        """End the process, dead or alive; a pipe to a dead reader is no error."""
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def reader() -> Iterator[Reader]:
    r = Reader()
    yield r
    r.close()


def test_a_reader_that_died_is_started_again(tmp_path: Path, reader: Reader) -> None:
    """The reader outlives every run of the module: one that ended (as a mutant's re-run
    can end it) is started again on the next command, and closing it is no error."""
    k, j = journaled(tmp_path / "j.db")
    k.decide(ToolCall("get_a", "{}", "t0"))
    j.close()
    reader.proc.kill()
    reader.proc.wait()
    reader.hold(tmp_path / "j.db")  # a dead pipe raised BrokenPipeError here
    assert reader.proc.poll() is None
    reader.release()
    reader.proc.kill()
    reader.proc.wait()
    with pytest.raises(AssertionError, match="could not hold"):
        reader.hold(tmp_path / "missing" / "j.db")  # a reply of error, not a dead reader
    assert reader.proc.poll() is None
    reader.close()  # a second close, at teardown, is no error either


def series(path: Path) -> list[Path]:
    """The rotated files oldest first, then the live file."""
    rotated = [p for p in path.parent.glob(f"{path.name}.*") if p.suffix[1:].isdigit()]
    return [*sorted(rotated, key=lambda p: int(p.suffix[1:])), path]


# ------------------------------------------------------------------------------ C1.3
OPS = st.one_of(
    st.tuples(st.just("decide"), st.integers(1, 40)),
    st.tuples(st.just("rotate_at"), st.integers(1, 96 * 1024)),
    st.tuples(st.just("hold"), st.just(0)),
    st.tuples(st.just("release"), st.just(0)),
    st.tuples(st.just("reopen"), st.just(0)),
)


@pytest.mark.fak_theorem("C1.3")
@settings(max_examples=30, deadline=None, phases=NO_SHRINK)
@given(st.lists(OPS, min_size=1, max_size=14), st.sampled_from(REPLICAS))
@example([("decide", 10), ("hold", 0), ("decide", 10), ("rotate_at", 1), ("decide", 1)], "")
@example([("rotate_at", 1), ("decide", 5), ("hold", 0), ("decide", 5), ("release", 0)], "A")
def test_rotation_under_a_reader_loses_no_acknowledged_row(
    tmp_path_factory: pytest.TempPathFactory,
    reader: Reader,
    ops: list[tuple[str, int]],
    replica: str,
) -> None:
    path = tmp_path_factory.mktemp("c13") / "j.db"
    k, j = journaled(path, replica=replica)
    acked: list[str] = []
    n = 0
    try:
        for op, arg in ops:
            if op == "decide":
                traces = [f"t{i}" for i in range(n, n + arg)]
                for trace in traces:
                    k.decide(ToolCall("get_a", f'{{"n": "{trace}"}}', trace))
                n += arg
                j.sync()
                acked += traces  # acknowledged: sync returned
            elif op == "rotate_at":
                j.rotate_bytes = arg
            elif op == "hold":
                reader.hold(path)
            elif op == "release":
                reader.release()
            else:
                rotate = j.rotate_bytes
                j.close()
                k, j = journaled(path, rotate_bytes=rotate, replica=replica)
    finally:
        j.close()
        reader.release()
    files = series(path)
    for f in files:
        assert fak(["journal", "verify", str(f)]) == 0, f"{f.name} does not verify alone"
    report = verify_files(files)
    assert report.ok, report.describe()
    rows = [r for f in files for r in read_rows(f)]
    assert [int(r["seq"]) for r in rows] == list(range(1, len(rows) + 1))
    assert {r["replica"] for r in rows} <= {replica}
    lost = [t for t in acked if t not in {r["trace"] for r in rows}]
    assert not lost, f"{len(lost)} acknowledged rows lost across {len(files)} files: {lost[:5]}"


@pytest.mark.fak_theorem("C1.2")
def test_an_interrupted_rotation_is_finished_on_reopen(tmp_path: Path) -> None:
    """Killed after the verified copy was renamed into place, before the cut: reopening
    cuts the rows the copy holds, so the series verifies with no row twice."""
    tmp_path = fresh(tmp_path)  # proof mode re-runs a witness in the same tmp_path
    path = tmp_path / "j.db"
    k, j = journaled(path)
    for i in range(5):
        k.decide(ToolCall("get_a", "{}", f"t{i}"))
    j.close()
    conn = sqlite3.connect(path)
    conn.execute(f"VACUUM INTO '{path}.1'")  # what the rotation had done when it was killed
    conn.close()
    k, j = journaled(path)
    k.decide(ToolCall("get_a", "{}", "after"))
    j.close()
    files = series(path)
    assert [f.name for f in files] == ["j.db.1", "j.db"]
    assert verify_files(files).ok
    assert [r["trace"] for f in files for r in read_rows(f)] == [
        *(f"t{i}" for i in range(5)),
        "after",
    ]


@pytest.mark.fak_theorem("C1.3")
def test_a_copy_that_cannot_be_made_postpones_rotation(tmp_path: Path) -> None:
    """No row leaves the live file unless its copy was made and verified: a copy that
    cannot be written (a directory stands where it goes) postpones the rotation and every
    row stays where it was."""
    tmp_path = fresh(tmp_path)  # proof mode re-runs a witness in the same tmp_path
    path = tmp_path / "j.db"
    k, j = journaled(path, rotate_bytes=1)
    (tmp_path / ".j.db.1.tmp").mkdir()  # VACUUM INTO cannot write its copy there
    for i in range(3):
        k.decide(ToolCall("get_a", "{}", f"t{i}"))
        j.sync()
    j.close()
    assert j.rotation_error is not None and "postponed" in j.rotation_error
    assert series(path) == [path]
    assert [r["trace"] for r in read_rows(path)] == ["t0", "t1", "t2"]


# ------------------------------------------------------------------------------ C1.4
COMMIT_TIMEOUT = 0.1
REQUEST_BYTES = 4 << 10
BACKLOG_BYTES = 16 << 10
ROW_OVERHEAD = 256  # the journal's stated per-row cost; the oracle adds it on its own
HUGE = 5000


def _committed_allow(path: Path, trace: str) -> bool:
    """Is ``trace``'s ALLOW row committed? Read through a connection of our own."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        row = conn.execute(
            "SELECT 1 FROM decisions WHERE trace = ? AND event = 'decide' AND verdict = 'ALLOW'",
            (trace,),
        ).fetchone()
    return row is not None


def _row_bytes(row: dict[str, Any]) -> int:
    keys = ("event", "trace", "tool", "args_digest", "verdict", "reason", "by")
    return ROW_OVERHEAD + sum(len(str(row[k]).encode("utf-8")) for k in keys)


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    return blocker


STEPS = st.one_of(
    st.tuples(st.just("ok"), st.booleans(), st.just(0)),
    st.tuples(st.just("locked"), st.booleans(), st.just(0)),
    st.tuples(st.just("flood"), st.booleans(), st.integers(1, 40)),
    st.tuples(st.just("backlog"), st.booleans(), st.just(0)),
)


@pytest.mark.fak_theorem("C1.4")
@settings(max_examples=20, deadline=None, phases=NO_SHRINK)
@given(st.lists(STEPS, min_size=1, max_size=6), st.booleans())
@example([("locked", False, 0), ("locked", True, 0)], False)
@example([("flood", True, 30), ("backlog", False, 0), ("ok", True, 0)], True)
def test_no_tool_runs_on_an_uncommitted_allow(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, bool, int]], breaks: bool
) -> None:
    path = tmp_path_factory.mktemp("c14") / "j.db"
    k, j = journaled(
        path,
        commit_timeout=COMMIT_TIMEOUT,
        max_request_bytes=REQUEST_BYTES,
        max_backlog_bytes=BACKLOG_BYTES,
    )
    state = GatewayState(k, journal=j)
    runs: dict[str, bool] = {}  # trace -> was its ALLOW committed when the tool ran
    k.register_tool(
        "get_a", lambda args: runs.setdefault(args["t"], _committed_allow(path, args["t"]))
    )
    answers: dict[str, tuple[str, str]] = {}
    flooded: list[str] = []
    refused_scopes: list[str] = []

    def syscall(trace: str, gateway: bool) -> None:
        call = ToolCall("get_a", f'{{"t": "{trace}"}}', trace)
        if gateway:
            v = state.syscall(call)["verdict"]
            answers[trace] = (v["kind"], v.get("reason", ""))
        else:
            _, verdict = k.syscall(call)
            answers[trace] = (k.kinds.name(verdict.kind), k.reasons.name(verdict.reason))

    j.sync()
    for i, (step, gateway, n) in enumerate([*steps, *([("broken", False, 0)] if breaks else [])]):
        trace = f"{step}-{i}"
        if step == "ok":
            syscall(trace, gateway)
        elif step == "locked":  # another connection holds the write lock: no commit can happen
            blocker = _hold_write_lock(path)
            try:
                syscall(trace, gateway)
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
        elif step == "flood":  # one request: n admissions under a huge trace id, then a call
            big = f"{trace}-" + "x" * HUGE
            with request_scope():
                for _ in range(n):
                    k.admit(ToolCall("fetch", "{}", big), Result(Status.OK, "r"))
                syscall(trace, gateway)
            flooded.append(big)
            k.decide(ToolCall("get_a", "{}", "outside-" + big))  # no scope: never refused
        elif step == "backlog":  # the writer is stuck and others' rows fill the backlog
            blocker = _hold_write_lock(path)
            try:
                while j.queued_bytes <= BACKLOG_BYTES:
                    k.decide(ToolCall("nope", "{}", "filler"))
                with request_scope():
                    syscall(trace, gateway)
                refused_scopes.append(trace)
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
        else:  # the disk refuses every write from now on (a real SQLite error)
            refuse_inserts(path)
            syscall(trace, gateway)
    with contextlib.suppress(JournalError):  # broken: the rows that could be written are
        j.sync(timeout=5)
    j.close()
    state.close()

    # No tool ever ran before its ALLOW was committed.
    early = [t for t, committed in runs.items() if not committed]
    assert not early, f"tools ran on uncommitted ALLOWs: {early}"
    for trace, (kind, reason) in answers.items():
        if kind == "ALLOW":
            assert trace in runs, f"{trace} was answered ALLOW but its tool did not run"
        else:
            assert trace not in runs, f"{trace} was refused ({reason}) but its tool ran"
        if trace.startswith(("locked", "broken")):
            assert (kind, reason) == ("DENY", "JOURNAL_DOWN"), (trace, kind, reason)
    rows = list(read_rows(path))
    assert all(len(str(v)) <= FIELD_CHARS for r in rows for v in r.values()), "a field is uncapped"
    for big in flooded:  # one request never queued more than its bound
        queued = sum(_row_bytes(r) for r in rows if r["trace"].startswith(big[:96]))
        assert queued <= REQUEST_BYTES, f"one request queued {queued} bytes"
    for trace in refused_scopes:  # nothing of a request is queued past the backlog bound
        assert not any(r["trace"] == trace and r["event"] == "decide" for r in rows), trace
        assert answers[trace] == ("DENY", "JOURNAL_DOWN")
