"""Real journal failures made from outside the process that writes the journal."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path


def refuse_inserts(path: Path) -> None:
    """From now on every insert into the journal at ``path`` fails with a real SQLite
    error, as a full or read-only disk would make it fail."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON decisions "
            "BEGIN SELECT RAISE(ABORT, 'the disk refused the write'); END"
        )
        conn.commit()
