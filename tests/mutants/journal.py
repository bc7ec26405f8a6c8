"""Mutants of the decision journal (theorems/journal.md): plausible wrong implementations."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any
from unittest import mock

from fak_core.journal import Journal, JournalError
from fak_core.kernel import Kernel
from pytest_fak.mutants import mutant
from tests.mutants.sourcepatch import edited

__all__: list[str] = []

_journal = importlib.import_module("fak_core.journal")
_FIELDS: tuple[str, ...] = _journal._FIELDS


def _hash_of(prev: str, row: dict[str, Any], fields: tuple[str, ...], link: bool) -> str:
    body = json.dumps({k: row[k] for k in fields}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(((prev if link else "") + body).encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------- C1.1
@mutant("C1.1/hash-skips-field")
def hash_skips_field() -> Any:
    """The row hash leaves out the verdict, so a DENY can be rewritten to ALLOW unseen."""
    fields = tuple(f for f in _FIELDS if f != "verdict")
    return mock.patch.object(
        _journal, "row_hash", lambda prev, row: _hash_of(prev, row, fields, link=True)
    )


@mutant("C1.1/no-prev-link")
def no_prev_link() -> Any:
    """The row hash covers the row only, not the previous row's hash (no chain)."""
    return mock.patch.object(
        _journal, "row_hash", lambda prev, row: _hash_of(prev, row, _FIELDS, link=False)
    )


@mutant("C1.1/rotation-restarts-chain")
def rotation_restarts_chain() -> Any:
    """A rotated file starts a fresh chain from the genesis hash."""
    return edited(
        Journal._cut,
        ('("prev_file_hash", head)', '("prev_file_hash", GENESIS)'),
        ("self._pending_cut = None", "self._pending_cut = None; self._hash = GENESIS"),
    )


@mutant("C1.1/uri-unencoded")
def uri_unencoded() -> Any:
    """Readers open ``file:PATH?mode=ro`` with the path spelled raw (the bug): a ``?`` or
    ``#`` in a journal's name cuts it short, and a ``%XX`` in it is decoded to another file."""
    return edited(_journal._read_only, ('f"{_uri(path)}?mode=ro"', 'f"file:{path}?mode=ro"'))


# ---------------------------------------------------------------------------------- C1.2
@mutant("C1.2/sync-returns-early")
def sync_returns_early() -> Any:
    """``sync`` acknowledges without waiting for the writer thread's commit."""

    def sync(self: Journal, timeout: float = 10.0) -> int:
        return self._submitted

    return mock.patch.object(Journal, "sync", sync)


@mutant("C1.2/reopen-restarts-chain")
def reopen_restarts_chain() -> Any:
    """Reopening a journal ignores its last row and starts again from the genesis hash."""
    return edited(Journal.__init__, ("if last is None:", "if True:"))


@mutant("C1.2/replica-claims-used-journal")
def replica_claims_used_journal() -> Any:
    """A journal a lone gateway already wrote is claimed for the replica that reopens it
    (the bug: its earlier rows name no replica, so the intact file no longer verifies)."""
    return edited(
        Journal.__init__,
        ("if owner is None and replica and fresh:", "if owner is None and replica:"),
    )


_ROTATE_BYTES_SET = Journal.rotate_bytes.fset  # type: ignore[attr-defined]
#: the setter's source is compiled alone, where the property it decorates is not a name
_UNDECORATED = ("@rotate_bytes.setter\n", "")


@mutant("C1.2/negative-rotate-bytes-accepted")
def negative_rotate_bytes_accepted() -> Any:
    """A journal constructed with a negative ``rotate_bytes`` is accepted (the bug: the CLI
    refused it, the Python constructor did not, and every commit then rotated the file)."""
    return edited(_ROTATE_BYTES_SET, _UNDECORATED, ("if value < 0:", "if False:"))


@mutant("C1.2/rotate-bytes-set-unchecked")
def rotate_bytes_set_unchecked() -> Any:
    """``rotate_bytes`` is checked when the journal is constructed only: assigned a negative
    size afterwards, it is accepted and every commit rotates (the bug fixed)."""
    return edited(
        _ROTATE_BYTES_SET,
        _UNDECORATED,
        ("if value < 0:", 'if value < 0 and "_rotate_bytes" not in self.__dict__:'),
    )


@mutant("C1.2/gate-ignores-failure")
def gate_ignores_failure() -> Any:
    """The journal's gate keeps deferring after a write failed (the kernel fails open)."""
    healthy = Journal.gate.__globals__["_HEALTHY"]

    def gate(self: Journal, view: Any) -> Any:
        return healthy

    return mock.patch.object(Journal, "gate", gate)


# ---------------------------------------------------------------------------------- C1.3
def _rotate_dropping_wal(self: Journal) -> None:
    """The rotation this module shipped before C1.3, verbatim in effect: the checkpoint's
    result is ignored, the live file is renamed and its WAL deleted, unverified."""
    try:
        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._conn.close()
        n = 1
        while Path(f"{self.path}.{n}").exists():
            n += 1
        os.replace(self.path, f"{self.path}.{n}")
        for suffix in ("-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)
        self._conn = _journal._connect(self.path, self.durability)
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
        self._fail(f"rotation failed: {exc}")


@mutant("C1.3/rotation-drops-wal")
def rotation_drops_wal() -> Any:
    """Rotation ignores the checkpoint's result, renames the live file and deletes its WAL
    before anything verifies the rotated file (the reported bug)."""
    return mock.patch.object(Journal, "_rotate", _rotate_dropping_wal)


@mutant("C1.3/cut-before-verify")
def cut_before_verify() -> Any:
    """The rotated copy is the main database file alone (rows still in the WAL are not in
    it) and the live rows are cut without verifying the copy."""
    return edited(
        Journal._rotate,
        (
            'self._conn.execute("VACUUM INTO ?", (str(tmp.absolute()),))',
            '__import__("shutil").copyfile(self.path, tmp)',
        ),
        ("problem = _check_copy(tmp, seq, head)", "problem = None"),
    )


# ---------------------------------------------------------------------------------- C1.4
@mutant("C1.4/dispatch-swallows-timeout")
def dispatch_swallows_timeout() -> Any:
    """The dispatch wait's failure or timeout is swallowed and the tool runs anyway (the
    kernel used to isolate the subscriber that waited)."""

    def dispatch_gate(self: Journal, call: Any, verdict: Any) -> None:
        with contextlib.suppress(JournalError):
            self.sync()

    return mock.patch.object(Journal, "dispatch_gate", dispatch_gate)


@mutant("C1.4/kernel-ignores-dispatch-gate")
def kernel_ignores_dispatch_gate() -> Any:
    """The kernel consults its dispatch gates but runs the tool whatever they say."""
    return edited(Kernel._dispatch_refusal, ("if refusal is None:", "if True:"))


@mutant("C1.4/request-bound-ignored")
def request_bound_ignored() -> Any:
    """A request scope may queue rows without bound (one request monopolises the writer)."""
    return edited(
        Journal._over, ("if receipt.queued_bytes + size > self.max_request_bytes:", "if False:")
    )


@mutant("C1.4/backlog-bound-ignored")
def backlog_bound_ignored() -> Any:
    """Rows of a request scope are queued however large the uncommitted backlog is."""
    return edited(
        Journal._over, ("if self._queued_bytes + size > self.max_backlog_bytes:", "if False:")
    )


@mutant("C1.4/field-uncapped")
def field_uncapped() -> Any:
    """Stored fields are kept whole: a 60 KB trace id costs 60 KB in every row."""
    return mock.patch.object(_journal, "_stored", lambda value: (str(value), len(str(value))))


@mutant("C1.5/witness-unjournaled")
def witness_unjournaled() -> Any:
    """The journal records the REQUIRE_WITNESS decision but not what the resolver settled
    (the gap: a witness-resolver ALLOW had no row)."""
    recorded = frozenset(k for k in _journal._RECORDED if k.value != "witness")
    return mock.patch.object(_journal, "_RECORDED", recorded)


@mutant("C1.5/kernel-keeps-settlement-quiet")
def kernel_keeps_settlement_quiet() -> Any:
    """The kernel settles a REQUIRE_WITNESS without telling its subscribers."""
    return edited(Kernel._settle_witness, ("self._emit(EventKind.WITNESS, call, settled)", "pass"))
