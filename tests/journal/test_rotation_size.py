"""The size a rotation is decided on is the live journal's pages in use (C1.3).

After a rotation cuts every row, the live file keeps their pages as free pages; a journal
whose threshold lies between the pages in use and the whole file must not rotate. The
pages are counted here through a connection of the test's own. And a commit after which
SQLite refuses to tell the size rotates nothing and stops nothing: the rows stay live and
the journal goes on.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from fak_core.journal import Journal, read_rows, verify_files


def _row(i: int, pad: int = 0) -> dict[str, str]:
    return {
        "event": "decide",
        "trace": f"r{i}",
        "tool": "t",
        "args_digest": "d",
        "verdict": "ALLOW",
        "reason": "x" * pad,
        "by": "k",
    }


def _pages(path: Path) -> tuple[int, int, int]:
    """(pages in the file, free pages, page size), read through a connection of our own."""
    with contextlib_closing(sqlite3.connect(path)) as conn:
        (count,) = conn.execute("PRAGMA page_count").fetchone()
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    return int(count), int(free), int(size)


@contextmanager
def contextlib_closing(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    try:
        yield conn
    finally:
        conn.close()


def _series(path: Path) -> list[Path]:
    out, n = [], 1
    while Path(f"{path}.{n}").exists():
        out.append(Path(f"{path}.{n}"))
        n += 1
    return out


@pytest.mark.fak_theorem("C1.3")
@pytest.mark.parametrize("margin_pages", [0, 2])
def test_free_pages_left_by_a_cut_do_not_count(margin_pages: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "j.db"
        j = Journal(path, rotate_bytes=0)
        try:
            for i in range(200):  # about 25 pages of rows (fields are kept to 256 characters)
                j.record_fields(_row(i, 250))
            j.sync()
            j.rotate_bytes = 1
            j.record_fields(_row(200))
            j.sync()  # this commit rotates: every row is cut, their pages are free
            j.record_fields(_row(201))
            j.sync()  # the writer finished the previous commit's rotation before this one
            j.rotate_bytes = 10**9
            j.record_fields(_row(202))
            j.sync()
            count, free, size = _pages(path)
            assert free >= 10, (count, free)  # the cut left many free pages
            rotated = len(_series(path))
            # over the pages in use (a row may take a few more), under the whole file
            threshold = (count - free + 3 + margin_pages) * size
            assert threshold < count * size
            j.rotate_bytes = threshold
            j.record_fields(_row(203))
        finally:
            j.close()
        count, free, size = _pages(path)
        in_use = (count - free) * size
        assert in_use <= threshold
        assert len(_series(path)) == rotated, "rotated on pages that are not in use"
        files = [*_series(path), path]
        assert verify_files(files).ok
        assert [r["trace"] for f in files for r in read_rows(f)] == [f"r{i}" for i in range(204)]


class _NoSize:
    """The writer's connection, except that SQLite refuses to count its pages."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("PRAGMA page_count"):
            raise sqlite3.OperationalError("disk I/O error")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@pytest.mark.fak_theorem("C1.3")
def test_a_size_that_cannot_be_read_rotates_nothing_and_stops_nothing() -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "j.db"
        j = Journal(path, rotate_bytes=1, commit_timeout=2)
        real = j._conn
        try:
            j.sync()
            j._conn = _NoSize(real)  # type: ignore[assignment]
            for i in range(3):
                j.record_fields(_row(i))
                assert j.sync() == i + 1
            assert j.error is None and _series(path) == []
            j._conn = real
            j.record_fields(_row(3))
            j.sync()
            j.record_fields(_row(4))
            j.sync()
        finally:
            j._conn = real
            j.close()
        files = [*_series(path), path]
        assert len(files) >= 2, "a readable size over the threshold rotates again"
        assert verify_files(files).ok
        assert [r["trace"] for f in files for r in read_rows(f)] == [f"r{i}" for i in range(5)]
