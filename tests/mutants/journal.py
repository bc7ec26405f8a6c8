"""Mutants of the decision journal (theorems/journal.md): plausible wrong implementations."""

from __future__ import annotations

import hashlib
import importlib
import json
from typing import Any
from unittest import mock

from fak_core.journal import Journal
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
        Journal._rotate,
        (
            "self._conn = _connect(self.path, self.durability)",
            "self._conn = _connect(self.path, self.durability); self._hash = GENESIS",
        ),
    )


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


@mutant("C1.2/gate-ignores-failure")
def gate_ignores_failure() -> Any:
    """The journal's gate keeps deferring after a write failed (the kernel fails open)."""
    healthy = Journal.gate.__globals__["_HEALTHY"]

    def gate(self: Journal, view: Any) -> Any:
        return healthy

    return mock.patch.object(Journal, "gate", gate)
