"""The decision journal: every decision and admission, durably, in a tamper-evident chain.

Rows live in SQLite (WAL mode). Each row's hash is SHA-256 over the previous row's hash
and the row's canonical JSON, so editing, deleting or reordering any committed row breaks
verification at the first broken link. Reopening a journal continues its chain; rotation
by size carries the chain into the next file.

Writes happen on a writer thread that commits in batches, so recording a decision costs
the decision a queue put. Durability is explicit: :meth:`Journal.sync` returns only once
every row recorded before the call is committed (group commit), so a caller that syncs
before acknowledging never acknowledges a row that a SIGKILL could lose. With
``durability="normal"`` (the default) a commit survives the process being killed; with
``"full"`` it also survives a power cut (an fsync per batch).

If the journal cannot be written it fails closed: :meth:`Journal.gate` is an adjudicator
that then denies every call, so nothing runs unrecorded.

The trade-off, and what it costs. "Acknowledged" means a caller was told of a decision:
the gateway (``fak serve --journal``) awaits :meth:`sync` off the event loop before every
response that carries a verdict, so an acknowledged row is committed (``normal``: it
survives SIGKILL of the gateway; ``full``: also a power cut), while the decision itself
never waits for the disk. Concurrent requests share one commit (group commit), so the
price under load is a thread hop and a share of a batch, not a commit per request. A row
decided but not yet acknowledged may be lost by a kill; its caller got no answer. Measured
by ``benchmarks/soak.py`` on a shared 2-core machine: ``kernel.decide`` 15 µs without a
journal, 39 µs with one (building the row, the queue put, and the writer thread's share of
the GIL); a lone decide-then-sync waits 85 µs at p50 (a commit each); at the wire the
journaled gateway kept 96 % of the unjournaled throughput (230 vs 240 req/s, p50 37 vs
35 ms, load-generator bound). A tool the kernel runs (``syscall``) waits for its ALLOW to
be committed before it runs (``durable_dispatch``). Known gap: the kernel isolates its
subscribers, so a journal that fails in the instant between a decision and its dispatch
cannot stop that one tool; the response is still refused and every later call denied.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fak_core.calls import ToolCall
from fak_core.events import Event, EventKind
from fak_core.nonblocking import nonblocking
from fak_core.reasons import Disposition
from fak_core.verdicts import Verdict
from fak_core.view import CallView

__all__ = [
    "GENESIS",
    "JOURNAL_DOWN",
    "Journal",
    "JournalError",
    "VerifyReport",
    "read_rows",
    "verify_files",
]

GENESIS = "0" * 64
#: The extension reason a kernel with a failed journal denies with.
JOURNAL_DOWN = 1900

_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY,
    ts TEXT NOT NULL,
    event TEXT NOT NULL,
    trace TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    verdict TEXT NOT NULL,
    reason TEXT NOT NULL,
    by TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_FIELDS = ("seq", "ts", "event", "trace", "tool", "args_digest", "verdict", "reason", "by")
_RECORDED = frozenset(
    {EventKind.DECIDE, EventKind.ADMIT, EventKind.QUARANTINE, EventKind.RESULT_DENY}
)


class JournalError(RuntimeError):
    """The journal cannot be written (or read); the message says why."""


def row_hash(prev_hash: str, row: dict[str, Any]) -> str:
    body = json.dumps({k: row[k] for k in _FIELDS}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256((prev_hash + body).encode("utf-8")).hexdigest()


def args_digest(call: ToolCall) -> str:
    raw = call.args
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _connect(path: Path, durability: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
    conn.executescript(_SCHEMA)
    return conn


@dataclass(frozen=True, slots=True)
class _Pending:
    ticket: int
    fields: dict[str, Any]


class Journal:
    """An append-only, hash-chained decision journal with a batching writer thread."""

    def __init__(
        self,
        path: str | Path,
        *,
        durability: str = "normal",
        rotate_bytes: int = 0,
        batch: int = 256,
    ) -> None:
        if durability not in ("normal", "full"):
            raise ValueError("durability must be 'normal' or 'full'")
        self.path = Path(path)
        self.durability = durability
        self.rotate_bytes = rotate_bytes
        self.batch = max(1, batch)
        self.error: str | None = None
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._submitted = 0
        self._committed = 0
        self._submit_lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = _connect(self.path, durability)
            last = self._conn.execute(
                "SELECT seq, hash FROM decisions ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        except (sqlite3.Error, OSError) as exc:
            raise JournalError(f"cannot open decision journal {self.path}: {exc}") from None
        if last is None:
            prev = self._meta("prev_file_hash") or GENESIS
            self._seq, self._hash = int(self._meta("first_seq") or 1) - 1, prev
        else:
            self._seq, self._hash = int(last[0]), str(last[1])
        self._thread = threading.Thread(target=self._writer, name="fak-journal", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- recording
    def record_fields(self, fields: dict[str, Any]) -> int:
        """Queue one row (event, trace, tool, args_digest, verdict, reason, by); a ticket."""
        if self.error is not None:
            raise JournalError(f"decision journal unavailable: {self.error}")
        with self._submit_lock:
            self._submitted += 1
            ticket = self._submitted
            self._queue.put(_Pending(ticket, fields))
        return ticket

    def attach(self, kernel: Any, *, durable_dispatch: bool = True) -> None:
        """Record the kernel's decisions and admissions, and fail it closed if writing fails.

        With ``durable_dispatch`` (the default) a tool the kernel runs waits, on its
        dispatch, until its ALLOW is committed: no tool runs on an unrecorded decision.
        """
        names = kernel.reasons
        kinds = kernel.kinds
        if names.name(JOURNAL_DOWN) != "JOURNAL_DOWN":
            names.register(JOURNAL_DOWN, "JOURNAL_DOWN", Disposition.ESCALATE)

        # Non-blocking for the events a decision emits (DECIDE, DENY: a row is queued for the
        # writer thread); only DISPATCH, which a syscall emits after deciding, waits.
        @nonblocking
        def on_event(event: Event) -> None:
            if event.kind is EventKind.DISPATCH and durable_dispatch:
                self.sync()
                return
            if event.kind not in _RECORDED or event.verdict is None:
                return
            v = event.verdict
            self.record_fields(
                {
                    "event": event.kind.value,
                    "trace": event.call.trace_id,
                    "tool": event.call.tool,
                    "args_digest": args_digest(event.call),
                    "verdict": kinds.name(v.kind),
                    "reason": names.name(v.reason),
                    "by": v.by,
                }
            )

        kernel.subscribe(on_event)
        kernel.add_adjudicator(self.gate, -1000, name="journal")

    @nonblocking
    def gate(self, view: CallView) -> Verdict:
        """DEFER while the journal is healthy; DENY everything once it cannot be written."""
        if self.error is None:
            return _HEALTHY
        return Verdict.deny(
            JOURNAL_DOWN, "journal", claim=f"decision journal unavailable: {self.error}"
        )

    def sync(self, timeout: float = 10.0) -> int:
        """Wait until every row recorded before this call is committed; the committed count."""
        target = self._submitted
        with self._cond:
            ok = self._cond.wait_for(
                lambda: self._committed >= target or self.error is not None, timeout
            )
            if self.error is not None:
                raise JournalError(f"decision journal unavailable: {self.error}")
            if not ok:
                raise JournalError(f"decision journal did not commit within {timeout} s")
            return self._committed

    def close(self) -> None:
        """Commit what is queued and stop the writer; from then on the gate denies."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=30)
        with self._cond:
            if self.error is None:
                self.error = "the journal is closed"
            self._cond.notify_all()
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- writer thread
    def _meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM journal_meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _writer(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            items: list[_Pending] = []
            if item is None:
                stop = True
            else:
                items.append(item)
            while len(items) < self.batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                items.append(more)
            if items:
                self._commit(items)

    def _commit(self, items: list[_Pending]) -> None:
        if self.error is not None:
            return
        seq, prev = self._seq, self._hash
        rows = []
        ts = datetime.now(UTC).isoformat(timespec="microseconds")
        for it in items:
            seq += 1
            row = {"seq": seq, "ts": ts, **{k: str(it.fields.get(k, "")) for k in _FIELDS[2:]}}
            h = row_hash(prev, row)
            rows.append((*(row[k] for k in _FIELDS), prev, h))
            prev = h
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                f"INSERT INTO decisions ({', '.join(_FIELDS)}, prev_hash, hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            self._conn.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            with self._cond:
                self.error = f"write failed: {exc}"
                self._cond.notify_all()
            return
        self._seq, self._hash = seq, prev
        with self._cond:
            self._committed = items[-1].ticket
            self._cond.notify_all()
        if self.rotate_bytes and self._size() > self.rotate_bytes:
            self._rotate()

    def _size(self) -> int:
        wal = Path(str(self.path) + "-wal")
        try:
            return self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        except OSError:
            return 0

    def _rotate(self) -> None:
        try:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._conn.close()
            n = 1
            while Path(f"{self.path}.{n}").exists():
                n += 1
            os.replace(self.path, f"{self.path}.{n}")
            for suffix in ("-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            self._conn = _connect(self.path, self.durability)
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "INSERT INTO journal_meta (key, value) VALUES (?, ?)",
                [
                    ("prev_file_hash", self._hash),
                    ("first_seq", str(self._seq + 1)),
                    ("prev_file", f"{self.path.name}.{n}"),
                ],
            )
            self._conn.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            with self._cond:
                self.error = f"rotation failed: {exc}"
                self._cond.notify_all()


_HEALTHY = Verdict.defer("journal")


# -------------------------------------------------------------------- reading, verifying
def read_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """Every row of one journal file, in sequence order."""
    p = Path(path)
    if not p.exists():
        raise JournalError(f"no journal file at {p}")
    try:
        conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        cur = conn.execute(
            f"SELECT {', '.join(_FIELDS)}, prev_hash, hash FROM decisions ORDER BY seq"
        )
        cols = [*_FIELDS, "prev_hash", "hash"]
        for values in cur:
            yield dict(zip(cols, values, strict=True))
        conn.close()
    except sqlite3.Error as exc:
        raise JournalError(f"cannot read journal {p}: {exc}") from None


def _file_meta(path: Path) -> dict[str, str]:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute("SELECT key, value FROM journal_meta").fetchall()
        conn.close()
    except sqlite3.Error:
        return {}
    return {str(k): str(v) for k, v in rows}


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """The outcome of verifying a chain of journal files."""

    ok: bool
    rows: int
    broken_file: str = ""
    broken_seq: int = 0
    problem: str = ""

    def describe(self) -> str:
        if self.ok:
            return f"ok: {self.rows} rows, chain intact"
        return f"BROKEN at {self.broken_file} row {self.broken_seq}: {self.problem}"


def verify_files(paths: Sequence[str | Path]) -> VerifyReport:
    """Verify one journal or a rotated series (oldest first); name the first broken row."""
    prev, expected_seq, count = GENESIS, None, 0
    for i, raw in enumerate(paths):
        path = Path(raw)
        meta = _file_meta(path)
        if i > 0 or "prev_file_hash" in meta:
            start = meta.get("prev_file_hash", prev)
            if i > 0 and start != prev:
                return VerifyReport(
                    False, count, str(path), 0, "does not continue the previous file's chain"
                )
            prev = start
        for row in read_rows(path):
            count += 1
            seq = int(row["seq"])
            if expected_seq is not None and seq != expected_seq:
                return VerifyReport(
                    False,
                    count,
                    str(path),
                    seq,
                    f"expected row {expected_seq} (a row is missing or reordered)",
                )
            if row["prev_hash"] != prev:
                return VerifyReport(
                    False, count, str(path), seq, "prev_hash does not match the previous row's hash"
                )
            if row_hash(prev, row) != row["hash"]:
                return VerifyReport(
                    False, count, str(path), seq, "row content does not match its hash (edited)"
                )
            prev, expected_seq = str(row["hash"]), seq + 1
    return VerifyReport(True, count)
