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

A tool the kernel runs (``syscall``) runs only once its ALLOW is committed:
:meth:`Journal.attach` installs :meth:`Journal.dispatch_gate` as the kernel's dispatch gate,
which waits for the commit (at most ``commit_timeout`` seconds) and otherwise refuses the
run with DENY/JOURNAL_DOWN (the tool never runs; a ``dispatch`` row records the refusal).

The backlog is bounded in bytes. Every stored field is at most ``FIELD_CHARS`` characters
(a longer one is kept as its head and its SHA-256, :func:`stored_text`), so no row is
large. A request scope (:meth:`Journal.request`, which every gateway request opens) may
queue at most ``max_request_bytes``, and nothing is queued in one while the whole backlog
is over ``max_backlog_bytes``: a row past either bound is not queued, the scope is refused,
the journal's gate denies its later calls and :meth:`Journal.sync` raises in it, so the
request is answered DENY/JOURNAL_DOWN (503 on the proxies) and everyone else's rows still
commit within a bounded wait. Rows recorded outside a request scope (a host calling the
kernel directly) are never refused.

Rotation (``rotate_bytes``) never loses a row: the live file is copied with
``VACUUM INTO`` (a consistent snapshot read through SQLite, WAL included, whatever other
connections or processes are reading), the copy is synced, opened read-only and verified
(its chain, its last row equal to the last committed one), renamed into place as
``FILE.n``, and only then are its rows deleted from the live file, in one transaction that
also records the link to ``FILE.n``. No file of the live journal is renamed or deleted,
so a reader in another process is never cut off, and no step depends on a WAL
checkpoint. A copy that fails or does not verify postpones rotation; an interrupted
rotation (killed after the rename) is finished when the journal is reopened.

The trade-off, and what it costs. "Acknowledged" means a caller was told of a decision:
the gateway (``fak serve --journal``) awaits :meth:`sync` off the event loop before every
response that carries a verdict, so an acknowledged row is committed (``normal``: it
survives SIGKILL of the gateway; ``full``: also a power cut), while the decision itself
never waits for the disk. Concurrent requests share one commit (group commit), so the
price under load is a thread hop and a share of a batch, not a commit per request. A row
decided but not yet acknowledged may be lost by a kill; its caller got no answer, and no
tool ran on it. Figures: ``benchmarks/soak.py`` (see the README).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import operator
import os
import queue
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from fak_core.calls import ToolCall
from fak_core.events import Event, EventKind
from fak_core.nonblocking import nonblocking
from fak_core.reasons import Disposition
from fak_core.verdicts import Verdict
from fak_core.view import CallView

__all__ = [
    "DEFAULT_MAX_BACKLOG_BYTES",
    "DEFAULT_MAX_REQUEST_BYTES",
    "FIELD_CHARS",
    "GENESIS",
    "JOURNAL_DOWN",
    "Journal",
    "JournalError",
    "Receipt",
    "VerifyReport",
    "current_receipt",
    "read_rows",
    "request_scope",
    "stored_text",
    "file_replica",
    "verify_chains",
    "verify_files",
]

GENESIS = "0" * 64
#: The extension reason a kernel with a failed journal denies with.
JOURNAL_DOWN = 1900
#: A stored field longer than this many characters is kept as its head and its SHA-256.
FIELD_CHARS = 256
_HEAD_CHARS = 96
#: Bytes one request scope may queue (its rows as stored, plus a fixed cost per row).
DEFAULT_MAX_REQUEST_BYTES = 4 << 20
#: Bytes of queued, uncommitted rows past which no request scope may queue more.
DEFAULT_MAX_BACKLOG_BYTES = 16 << 20
#: What a row costs beyond its fields: sequence number, timestamp, two hashes, SQLite.
_ROW_OVERHEAD = 256

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
_STORED_FIELDS = _FIELDS[2:]
_RECORDED = frozenset(
    {
        EventKind.DECIDE,
        EventKind.WITNESS,
        EventKind.ADMIT,
        EventKind.QUARANTINE,
        EventKind.RESULT_DENY,
    }
)


class JournalError(RuntimeError):
    """The journal cannot be written (or read); the message says why."""


def row_hash(prev_hash: str, row: dict[str, Any]) -> str:
    fields = {k: row[k] for k in _FIELDS}
    if row.get("replica"):  # a replica's row: its id is covered (a lone gateway's has none)
        fields["replica"] = row["replica"]
    body = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256((prev_hash + body).encode("utf-8")).hexdigest()


def args_digest(call: ToolCall) -> str:
    raw = call.args
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(data).hexdigest()


def stored_text(value: Any) -> str:
    """A field as the journal stores it (what its hash covers): its text, or, past
    :data:`FIELD_CHARS` characters, its head, its length and the SHA-256 of the whole, so
    no row is large; a lone surrogate is escaped, so every stored value is UTF-8."""
    return _stored(value)[0]


def _stored(value: Any) -> tuple[str, int]:
    """:func:`stored_text` and its size in UTF-8 bytes."""
    text = value if isinstance(value, str) else str(value)
    if text.isascii():
        if len(text) <= FIELD_CHARS:
            return text, len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
            size = len(text.encode("utf-8"))
        if len(text) <= FIELD_CHARS:
            return text, size
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    short = f"{text[:_HEAD_CHARS]}…[{len(text)} chars, sha256:{digest}]"
    return short, len(short.encode("utf-8"))


_GET_STORED = operator.itemgetter(*_STORED_FIELDS)


def _row_values(fields: dict[str, Any]) -> tuple[tuple[str, ...], int]:
    """The stored fields of a row, and its size in bytes (fields plus the fixed cost)."""
    try:  # the common case, checked at once: every field present, short ASCII text
        values: tuple[str, ...] = _GET_STORED(fields)
        joined = "".join(values)
    except (KeyError, TypeError):
        pass
    else:
        if joined.isascii() and max(map(len, values)) <= FIELD_CHARS:
            return values, _ROW_OVERHEAD + len(joined)
    size = _ROW_OVERHEAD
    out: list[str] = []
    for key in _STORED_FIELDS:
        text, n = _stored(fields.get(key, ""))
        out.append(text)
        size += n
    return tuple(out), size


@dataclass(slots=True)
class Receipt:
    """One request's share of the journal: the bytes it queued, and why it was refused."""

    queued_bytes: int = 0
    refused: str | None = None


_RECEIPT: contextvars.ContextVar[Receipt | None] = contextvars.ContextVar(
    "fak_journal_receipt", default=None
)


def current_receipt() -> Receipt | None:
    """The current request scope's receipt (None outside a scope)."""
    return _RECEIPT.get()


@contextlib.contextmanager
def request_scope() -> Iterator[Receipt]:
    """A request scope: rows recorded in it (on this thread, or in any thread or task its
    context is copied to) count against the journal's ``max_request_bytes``; once one is
    refused, :meth:`Journal.gate` denies and :meth:`Journal.sync` raises in it."""
    receipt = Receipt()
    token = _RECEIPT.set(receipt)
    try:
        yield receipt
    finally:
        _RECEIPT.reset(token)


def _uri(path: Path) -> str:
    """``path`` as an SQLite URI: absolute and percent-encoded, so a ``?``, ``#`` or ``%``
    in a name (or a relative name starting with ``file:``) names that very file."""
    return path.absolute().as_uri()


def _connect(path: Path, durability: str) -> sqlite3.Connection:
    conn = sqlite3.connect(_uri(path), uri=True, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
    conn.executescript(_SCHEMA)
    columns = {r[1] for r in conn.execute("PRAGMA table_info(decisions)")}
    if "replica" not in columns:  # a journal from before replicas: rows without an id
        conn.execute("ALTER TABLE decisions ADD COLUMN replica TEXT NOT NULL DEFAULT ''")
    return conn


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{_uri(path)}?mode=ro", uri=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _last_row(conn: sqlite3.Connection) -> tuple[int, str] | None:
    last = conn.execute("SELECT seq, hash FROM decisions ORDER BY seq DESC LIMIT 1").fetchone()
    return None if last is None else (int(last[0]), str(last[1]))


def _check_copy(path: Path, seq: int, head: str) -> str | None:
    """Why the rotated copy at ``path`` cannot replace rows 1..``seq`` (None: it can)."""
    report = verify_files([path])
    if not report.ok:
        return f"the copy does not verify: {report.describe()}"
    try:
        with contextlib.closing(_read_only(path)) as conn:
            last = _last_row(conn)
    except sqlite3.Error as exc:
        return f"the copy cannot be read: {exc}"
    if last != (seq, head):
        return f"the copy ends at {last}, not at the last committed row {seq}"
    return None


class _Pending(NamedTuple):  # a tuple: the cheapest record to build on the decision path
    ticket: int
    values: tuple[str, ...]
    size: int


class Journal:
    """An append-only, hash-chained decision journal with a batching writer thread."""

    def __init__(
        self,
        path: str | Path,
        *,
        durability: str = "normal",
        rotate_bytes: int = 0,
        batch: int = 256,
        commit_timeout: float = 10.0,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        max_backlog_bytes: int = DEFAULT_MAX_BACKLOG_BYTES,
        replica: str = "",
    ) -> None:
        if durability not in ("normal", "full"):
            raise ValueError("durability must be 'normal' or 'full'")
        if not 0 < commit_timeout < float("inf"):
            raise ValueError(
                f"commit_timeout must be a positive number of seconds, not {commit_timeout}"
            )
        if max_request_bytes < 1 or max_backlog_bytes < 1:
            raise ValueError("max_request_bytes and max_backlog_bytes must be positive")
        self.path = Path(path)
        self.durability = durability
        self.rotate_bytes = rotate_bytes
        self.batch = max(1, batch)
        #: Seconds :meth:`sync` (and so a tool's dispatch) waits for a commit by default.
        self.commit_timeout = commit_timeout
        self.max_request_bytes = max_request_bytes
        self.max_backlog_bytes = max_backlog_bytes
        self.error: str | None = None
        #: Why the last rotation was postponed (None: the last one completed).
        self.rotation_error: str | None = None
        self.rotations = 0
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._submitted = 0
        self._committed = 0
        self._queued_bytes = 0
        self._submit_lock = threading.Lock()
        self._retry_at = 0
        self._pending_cut: tuple[str, int, str] | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = _connect(self.path, durability)
            self._recover_rotation()
            last = _last_row(self._conn)
        except (sqlite3.Error, OSError) as exc:
            raise JournalError(f"cannot open decision journal {self.path}: {exc}") from None
        #: The replica (gateway process) whose chain this is; in every row it writes.
        self.replica = replica
        owner = self._meta("replica")
        fresh = last is None and self._meta("prev_file_hash") is None
        if owner is None and replica and fresh:  # only a new chain is claimed for a replica
            self._conn.execute(
                "INSERT INTO journal_meta (key, value) VALUES ('replica', ?)", (replica,)
            )
        elif (owner or "") != replica:
            self._conn.close()
            raise JournalError(
                f"decision journal {self.path} is the chain of replica {owner or ''!r}, not "
                f"{replica!r}: each replica writes its own file (fak serve --replica-id); "
                "give this one a new file"
            )
        if last is None:
            prev = self._meta("prev_file_hash") or GENESIS
            self._seq, self._hash = int(self._meta("first_seq") or 1) - 1, prev
        else:
            self._seq, self._hash = last
        self._thread = threading.Thread(target=self._writer, name="fak-journal", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- recording
    @staticmethod
    def request() -> contextlib.AbstractContextManager[Receipt]:
        """:func:`request_scope` (a request scope is not tied to one journal)."""
        return request_scope()

    def record_fields(self, fields: dict[str, Any], *, bounded: bool = True) -> int:
        """Queue one row (event, trace, tool, args_digest, verdict, reason, by); a ticket.

        In a request scope the row is refused (:class:`JournalError`, and the scope is
        marked refused) past the request's or the backlog's byte bound; ``bounded=False``
        (the journal's own refusal rows) skips the bounds."""
        if self.error is not None:
            raise JournalError(f"decision journal unavailable: {self.error}")
        values, size = _row_values(fields)
        receipt = _RECEIPT.get() if bounded else None
        with self._submit_lock:
            if receipt is not None:
                refusal = receipt.refused or self._over(receipt, size)
                if refusal is not None:
                    receipt.refused = refusal
                    raise JournalError(refusal)
                receipt.queued_bytes += size
            self._queued_bytes += size
            self._submitted += 1
            ticket = self._submitted
            self._queue.put(_Pending(ticket, values, size))
        return ticket

    def _over(self, receipt: Receipt, size: int) -> str | None:
        if receipt.queued_bytes + size > self.max_request_bytes:
            return (
                "decision journal unavailable for this request: its rows are over the "
                f"{self.max_request_bytes}-byte limit per request; send fewer tool calls "
                "or tool results in one request"
            )
        if self._queued_bytes + size > self.max_backlog_bytes:
            return (
                "decision journal unavailable: over "
                f"{self.max_backlog_bytes} bytes of rows are waiting to be committed; "
                "retry shortly"
            )
        return None

    @property
    def queued_bytes(self) -> int:
        """Bytes of rows queued and not yet committed (the backlog)."""
        return self._queued_bytes

    def attach(self, kernel: Any, *, durable_dispatch: bool = True) -> None:
        """Record the kernel's decisions and admissions, and fail it closed if writing fails.

        With ``durable_dispatch`` (the default) :meth:`dispatch_gate` becomes a dispatch
        gate of the kernel: no tool runs before its ALLOW is committed.
        """
        names = kernel.reasons
        kinds = kernel.kinds
        if names.name(JOURNAL_DOWN) != "JOURNAL_DOWN":
            names.register(JOURNAL_DOWN, "JOURNAL_DOWN", Disposition.ESCALATE)

        # Non-blocking: a row is queued for the writer thread, nothing waits here.
        @nonblocking
        def on_event(event: Event) -> None:
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
        if durable_dispatch:
            kernel.add_dispatch_gate(self.dispatch_gate)

    @nonblocking
    def gate(self, view: CallView) -> Verdict:
        """DEFER while the journal is healthy; DENY everything once it cannot be written,
        and every call of a request scope that was refused."""
        if self.error is None:
            receipt = _RECEIPT.get()
            if receipt is None or receipt.refused is None:
                return _HEALTHY
            claim = receipt.refused
        else:
            claim = f"decision journal unavailable: {self.error}"
        return Verdict.deny(JOURNAL_DOWN, "journal", claim=claim)

    def dispatch_gate(self, call: ToolCall, verdict: Verdict) -> Verdict | None:
        """None once every row recorded so far (``call``'s ALLOW among them) is committed.
        Otherwise (a failure, a refused request, no commit within ``commit_timeout``) a
        DENY/JOURNAL_DOWN: the kernel does not run the tool, and a ``dispatch`` row
        records the refusal."""
        try:
            self.sync()
        except JournalError as exc:
            refusal = Verdict.deny(
                JOURNAL_DOWN, "journal", claim=f"{exc}; the tool {call.tool!r} did not run"
            )
            with contextlib.suppress(JournalError):
                self.record_fields(
                    {
                        "event": "dispatch",
                        "trace": call.trace_id,
                        "tool": call.tool,
                        "args_digest": args_digest(call),
                        "verdict": "DENY",
                        "reason": "JOURNAL_DOWN",
                        "by": "journal",
                    },
                    bounded=False,
                )
            return refusal
        return None

    def sync(self, timeout: float | None = None) -> int:
        """Wait until every row recorded before this call is committed; the committed count.

        Raises :class:`JournalError` when the journal failed, when the current request
        scope was refused, or after ``timeout`` seconds (default ``commit_timeout``)."""
        receipt = _RECEIPT.get()
        if receipt is not None and receipt.refused is not None:
            raise JournalError(receipt.refused)
        limit = self.commit_timeout if timeout is None else timeout
        target = self._submitted
        with self._cond:
            ok = self._cond.wait_for(
                lambda: self._committed >= target or self.error is not None, limit
            )
            if self.error is not None:
                raise JournalError(f"decision journal unavailable: {self.error}")
            if not ok:
                raise JournalError(f"decision journal did not commit within {limit:g} s")
            return self._committed

    def close(self) -> None:
        """Commit what is queued and stop the writer; from then on the gate denies."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=30)
        self._fail("the journal is closed")
        if not self._thread.is_alive():  # a writer still inside a commit keeps its connection
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

    def _fail(self, why: str) -> None:
        with self._cond:
            if self.error is None:
                self.error = why
            self._cond.notify_all()

    def _writer(self) -> None:
        try:
            self._drain()
        except BaseException as exc:  # never die silently: fail closed instead
            self._fail(f"the writer stopped: {type(exc).__name__}: {exc}")

    def _drain(self) -> None:
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
            row = {"seq": seq, "ts": ts, **dict(zip(_FIELDS[2:], it.values, strict=True))}
            row["replica"] = self.replica
            h = row_hash(prev, row)
            rows.append((*(row[k] for k in _FIELDS), self.replica, prev, h))
            prev = h
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                f"INSERT INTO decisions ({', '.join(_FIELDS)}, replica, prev_hash, hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            self._conn.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            self._fail(f"write failed: {exc}")
            return
        self._seq, self._hash = seq, prev
        done = sum(it.size for it in items)
        with self._submit_lock:
            self._queued_bytes -= done
        with self._cond:
            self._committed = items[-1].ticket
            self._cond.notify_all()
        if self._pending_cut is not None:
            self._cut()
        elif self.rotate_bytes:
            size = self._size()
            if size > self.rotate_bytes and size > self._retry_at:
                self._rotate()

    @property
    def rotate_bytes(self) -> int:
        """Rotate past this many bytes of live journal; 0 never rotates."""
        return self._rotate_bytes

    @rotate_bytes.setter
    def rotate_bytes(self, value: int) -> None:
        if value < 0:  # (a negative size would rotate after every commit)
            raise ValueError(
                f"rotate_bytes must be 0 (never rotate) or a positive number of bytes, not {value}"
            )
        self._rotate_bytes = value

    def _size(self) -> int:
        """Bytes of the live journal's pages in use (WAL included; free pages left out)."""
        try:
            (pages,) = self._conn.execute("PRAGMA page_count").fetchone()
            (free,) = self._conn.execute("PRAGMA freelist_count").fetchone()
            (page,) = self._conn.execute("PRAGMA page_size").fetchone()
        except sqlite3.Error:
            return 0
        return (int(pages) - int(free)) * int(page)

    def _postpone(self, why: str) -> None:
        self.rotation_error = why
        self._retry_at = self._size() + self.rotate_bytes

    def _rotate(self) -> None:
        """Copy the live file to the next ``FILE.n`` (through SQLite), verify the copy,
        rename it into place, and only then cut its rows from the live file."""
        seq, head = self._seq, self._hash
        n = 1
        while Path(f"{self.path}.{n}").exists():
            n += 1
        target = Path(f"{self.path}.{n}")
        tmp = target.with_name(f".{target.name}.tmp")
        try:
            tmp.unlink(missing_ok=True)
            self._conn.execute("VACUUM INTO ?", (str(tmp.absolute()),))
            _fsync(tmp)
            problem = _check_copy(tmp, seq, head)
            if problem is not None:
                raise JournalError(problem)
            os.replace(tmp, target)
            _fsync(target.parent)
        except (sqlite3.Error, OSError, JournalError) as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            self._postpone(f"rotation to {target.name} postponed: {exc}")
            return
        self._pending_cut = (target.name, seq, head)
        self._cut()

    def _cut(self) -> None:
        """Delete the rows a verified rotated file holds and link the live file to it (one
        transaction); if that fails the cut is retried after the next commit."""
        assert self._pending_cut is not None
        name, seq, head = self._pending_cut
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.execute("DELETE FROM decisions WHERE seq <= ?", (seq,))
            self._conn.executemany(
                "INSERT OR REPLACE INTO journal_meta (key, value) VALUES (?, ?)",
                [("prev_file_hash", head), ("first_seq", str(seq + 1)), ("prev_file", name)],
            )
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            self.rotation_error = f"rotation to {name} not finished (retried): {exc}"
            return
        self._pending_cut = None
        self.rotation_error = None
        self.rotations += 1

    def _recover_rotation(self) -> None:
        """Finish a rotation that was killed after renaming its copy and before the cut:
        the newest ``FILE.n`` is not linked yet and its last row is in the live file."""
        n = 1
        while Path(f"{self.path}.{n}").exists():
            n += 1
        newest = Path(f"{self.path}.{n - 1}")
        if n == 1 or self._meta("prev_file") == newest.name:
            return
        try:
            with contextlib.closing(_read_only(newest)) as conn:
                last = _last_row(conn)
        except sqlite3.Error:
            return
        if last is None:
            return
        here = self._conn.execute("SELECT hash FROM decisions WHERE seq = ?", (last[0],))
        row = here.fetchone()
        if row is not None and str(row[0]) == last[1]:
            self._pending_cut = (newest.name, *last)
            self._cut()


_HEALTHY = Verdict.defer("journal")


# -------------------------------------------------------------------- reading, verifying
def read_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """Every row of one journal file, in sequence order."""
    p = Path(path)
    if not p.exists():
        raise JournalError(f"no journal file at {p}")
    try:
        conn = _read_only(p)
        has_replica = any(r[1] == "replica" for r in conn.execute("PRAGMA table_info(decisions)"))
        replica = "replica" if has_replica else "'' AS replica"
        cur = conn.execute(
            f"SELECT {', '.join(_FIELDS)}, {replica}, prev_hash, hash FROM decisions ORDER BY seq"
        )
        cols = [*_FIELDS, "replica", "prev_hash", "hash"]
        for values in cur:
            yield dict(zip(cols, values, strict=True))
        conn.close()
    except sqlite3.Error as exc:
        raise JournalError(f"cannot read journal {p}: {exc}") from None


def _file_meta(path: Path) -> dict[str, str]:
    try:
        conn = _read_only(path)
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


def file_replica(path: str | Path) -> str:
    """The replica whose chain a journal file holds ("" for a lone gateway's)."""
    return _file_meta(Path(path)).get("replica", "")


def verify_chains(paths: Sequence[str | Path]) -> list[tuple[str, VerifyReport]]:
    """Verify the files of several replicas: grouped into one chain per replica (each
    replica's files in the order given, oldest first), each chain verified on its own."""
    chains: dict[str, list[str | Path]] = {}
    for raw in paths:
        chains.setdefault(file_replica(raw), []).append(raw)
    return [(replica, verify_files(files)) for replica, files in chains.items()]


def verify_files(paths: Sequence[str | Path]) -> VerifyReport:
    """Verify one journal or a rotated series (oldest first); name the first broken row.
    Every row must carry the replica id its files declare."""
    prev, expected_seq, count = GENESIS, None, 0
    for i, raw in enumerate(paths):
        path = Path(raw)
        meta = _file_meta(path)
        owner = meta.get("replica", "")
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
            if (row.get("replica") or "") != owner:
                return VerifyReport(
                    False,
                    count,
                    str(path),
                    seq,
                    f"row names replica {row.get('replica')!r}, the file is the chain of {owner!r}",
                )
            if row_hash(prev, row) != row["hash"]:
                return VerifyReport(
                    False, count, str(path), seq, "row content does not match its hash (edited)"
                )
            prev, expected_seq = str(row["hash"]), seq + 1
    return VerifyReport(True, count)
