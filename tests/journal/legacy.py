"""A journal as written before replicas existed: no ``replica`` column, hashes without one.

Written by hand with ``sqlite3`` (the journal's old schema, spelled out here), so the
tests that open, read or continue such a file do not depend on the code they check.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.journal.test_journal import chain_hash

OLD_SCHEMA = (
    "CREATE TABLE decisions (seq INTEGER PRIMARY KEY, ts TEXT NOT NULL, event TEXT NOT"
    " NULL, trace TEXT NOT NULL, tool TEXT NOT NULL, args_digest TEXT NOT NULL,"
    " verdict TEXT NOT NULL, reason TEXT NOT NULL, by TEXT NOT NULL,"
    " prev_hash TEXT NOT NULL, hash TEXT NOT NULL);"
    "CREATE TABLE journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
)
FIELDS = ("seq", "ts", "event", "trace", "tool", "args_digest", "verdict", "reason", "by")


def write_old_journal(path: Path, rows: list[dict[str, Any]]) -> list[str]:
    """Write ``rows`` (the nine hashed fields each, ``seq`` from 1) chained from the
    genesis hash into a journal of the old schema at ``path``; each row's hash, in order."""
    prev = "0" * 64
    hashes: list[str] = []
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(OLD_SCHEMA)
        for row in rows:
            h = chain_hash(prev, row)
            conn.execute(
                "INSERT INTO decisions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*(row[k] for k in FIELDS), prev, h),
            )
            hashes.append(h)
            prev = h
        conn.commit()
    return hashes


def numbered(n: int, row: Callable[[int], dict[str, Any]]) -> list[dict[str, Any]]:
    """``n`` rows ``row(i)`` for i = 1..n, each given its ``seq``."""
    return [{"seq": i, **row(i)} for i in range(1, n + 1)]
