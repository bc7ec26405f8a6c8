"""The journal at its edges: what a stored field and a row cost, the argument digest, files
that are not journals or predate replicas, an interrupted rotation in every shape reopening
meets, and a writer that stops when closed.

The oracles are this file's own: the stored form and row size written from the theorem's
statement, SHA-256 and JSON from the standard library, rows read through our own SQLite
connection, and hand-made files.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import ToolCall
from fak_core.journal import (
    Journal,
    JournalError,
    read_rows,
    request_scope,
    stored_text,
    verify_files,
)
from tests.journal.legacy import numbered, write_old_journal
from tests.journal.test_journal import fresh, journaled, stored_rows

ROW_OVERHEAD = 256
KEEP = 256
HEAD = 96
STORED = ("event", "trace", "tool", "args_digest", "verdict", "reason", "by")


# ------------------------------------------------------------------------------ C1.4
def escaped(text: str) -> str:
    """A lone surrogate written as its backslash escape (``\\udXXX``); the rest unchanged."""
    return "".join(f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def expected_stored(value: str) -> str:
    """The stored form the theorem states: whole up to 256 characters, else the first 96,
    the length and the SHA-256 of the whole (all after escaping lone surrogates)."""
    text = escaped(value)
    if len(text) <= KEEP:
        return text
    whole = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return f"{text[:HEAD]}\u2026[{len(text)} chars, sha256:{whole}]"


def row_size(fields: dict[str, str]) -> int:
    return ROW_OVERHEAD + sum(len(expected_stored(fields.get(k, "")).encode()) for k in STORED)


TEXT = st.one_of(
    st.text(max_size=300),
    st.text(st.sampled_from("ab\u00e9\u4e2d\U0001f600\ud800\udfff"), min_size=250, max_size=262),
    st.integers(0, 600).map(lambda n: "x" * n),
    st.sampled_from(["x" * 255, "x" * 256, "x" * 257, "\u00e9" * 256, "\u00e9" * 257]),
)


@pytest.mark.fak_theorem("C1.4")
@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(STORED), TEXT), st.booleans())
def test_a_rows_stored_fields_and_size_are_what_the_theorem_states(
    fields: dict[str, str], over: bool
) -> None:
    """A request bound of exactly the row's size takes it, one byte less refuses it; the
    row holds each field in its stored form (a field not given is empty), and verifies."""
    with tempfile.TemporaryDirectory() as tmp:
        _one_row(Path(tmp), fields, over)


def _one_row(tmp_path: Path, fields: dict[str, str], over: bool) -> None:
    size = row_size(fields)
    j = Journal(tmp_path / "j.db", max_request_bytes=size - 1 if over else size)
    with request_scope() as receipt:
        if over:
            with pytest.raises(JournalError):
                j.record_fields(dict(fields))
            assert receipt.queued_bytes == 0
        else:
            j.record_fields(dict(fields))
            assert receipt.queued_bytes == size
            j.sync()
    j.close()
    rows = stored_rows(tmp_path / "j.db")
    if over:
        assert rows == []
        return
    (row,) = rows
    assert {k: row[k] for k in STORED} == {k: expected_stored(fields.get(k, "")) for k in STORED}
    assert all(len(row[k]) <= KEEP for k in STORED)
    assert verify_files([tmp_path / "j.db"]).ok


@pytest.mark.fak_theorem("C1.4")
@pytest.mark.parametrize("n", [0, 1, KEEP - 1, KEEP, KEEP + 1, 70_000])
@pytest.mark.parametrize("fill", ["x", "\u00e9", "\ud800"])
def test_stored_text_keeps_a_field_whole_up_to_the_limit(n: int, fill: str) -> None:
    value = fill * n
    assert stored_text(value) == expected_stored(value)
    assert len(stored_text(value)) <= KEEP
    assert stored_text(n) == str(n)  # a field that is not text is stored as its text


#: U+D800 (a lone surrogate) under "surrogatepass", its three bytes written out by hand.
D800_BYTES = b"\xed\xa0\x80"


@pytest.mark.fak_theorem("C1.4")
@pytest.mark.parametrize(
    ("args", "data"),
    [
        ('{"i": 1}', b'{"i": 1}'),
        ('{"s": "\u00e9"}', b'{"s": "\xc3\xa9"}'),
        ('{"s": "\ud800"}', b'{"s": "' + D800_BYTES + b'"}'),
        (b'{"raw": "\xff"}', b'{"raw": "\xff"}'),
    ],
)
def test_the_argument_digest_is_the_sha256_of_the_arguments(
    tmp_path: Path, args: str | bytes, data: bytes
) -> None:
    """The args_digest of a decision row and of a refused dispatch's row is ``sha256:`` and
    the SHA-256 of the call's argument bytes (text in UTF-8, a lone surrogate passed)."""
    tmp_path = fresh(tmp_path)
    k, j = journaled(tmp_path / "j.db")
    k.decide(ToolCall("get_a", args, "t1"))
    j.dispatch_gate(ToolCall("get_a", args, "t2"), None)  # type: ignore[arg-type]
    j.close()
    want = "sha256:" + hashlib.sha256(data).hexdigest()
    rows = stored_rows(tmp_path / "j.db")
    assert [r["args_digest"] for r in rows] == [want]
    j2 = Journal(tmp_path / "j2.db")
    j2.close()
    j2.dispatch_gate(ToolCall("get_a", args, "t2"), None)  # type: ignore[arg-type]
    assert stored_rows(tmp_path / "j2.db") == []  # a failed journal records nothing


# ------------------------------------------------------------------------------ C1.1
def _legacy_journal(path: Path, n: int) -> list[str]:
    """A journal as written before replicas; its rows' traces."""
    rows = numbered(
        n,
        lambda i: {
            "ts": f"2026-01-01T00:00:0{i}", "event": "decide", "trace": f"t{i}",
            "tool": "get_a", "args_digest": "sha256:" + "0" * 64, "verdict": "ALLOW",
            "reason": "OK", "by": "policy",
        },
    )  # fmt: skip
    write_old_journal(path, rows)
    return [r["trace"] for r in rows]


@pytest.mark.fak_theorem("C1.1")
def test_a_journal_from_before_replicas_reads_and_verifies(tmp_path: Path) -> None:
    tmp_path = fresh(tmp_path)
    path = tmp_path / "old.db"
    traces = _legacy_journal(path, 4)
    rows = list(read_rows(path))
    assert [(r["trace"], r["replica"]) for r in rows] == [(t, "") for t in traces]
    assert verify_files([path]).ok and verify_files([path]).rows == 4
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE decisions SET verdict = 'DENY' WHERE seq = 3")
        conn.commit()
    report = verify_files([path])
    assert (report.ok, report.broken_seq) == (False, 3)


@pytest.mark.fak_theorem("C1.1")
@pytest.mark.parametrize("what", ["text", "empty-sqlite", "other-table"])
def test_a_file_that_is_not_a_journal_is_an_error_never_intact(tmp_path: Path, what: str) -> None:
    tmp_path = fresh(tmp_path)
    path = tmp_path / "x.db"
    if what == "text":
        path.write_bytes(b"this is not a database, not even a little" * 50)
    else:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            if what == "other-table":
                conn.execute("CREATE TABLE other (a TEXT)")
            conn.commit()
    with pytest.raises(JournalError, match="cannot read journal"):
        verify_files([path])
    with pytest.raises(JournalError, match="cannot read journal"):
        list(read_rows(path))


@pytest.mark.fak_theorem("C1.1")
def test_a_path_with_no_file_is_an_error_and_stays_empty(tmp_path: Path) -> None:
    tmp_path = fresh(tmp_path)
    path = tmp_path / "none.db"
    with pytest.raises(JournalError, match="no journal file at"):
        list(read_rows(path))
    with pytest.raises(JournalError, match="no journal file at"):
        verify_files([path])
    assert not path.exists()


# ------------------------------------------------------------------------------ C1.3
def _decide(path: Path, traces: list[str], **kw: Any) -> None:
    k, j = journaled(path, **kw)
    for t in traces:
        k.decide(ToolCall("get_a", "{}", t))
    j.close()


def _copy(src: Path, dst: Path) -> None:
    """What a rotation killed after its rename leaves: a verified copy under ``dst``."""
    with contextlib.closing(sqlite3.connect(src)) as conn:
        conn.execute("VACUUM INTO ?", (str(dst),))


def _traces(files: list[Path]) -> list[str]:
    return [r["trace"] for f in files for r in read_rows(f)]


@pytest.mark.fak_theorem("C1.3")
def test_reopening_finishes_every_interrupted_rotation_of_the_series(tmp_path: Path) -> None:
    tmp_path = fresh(tmp_path)
    path = tmp_path / "j.db"
    one, two = Path(f"{path}.1"), Path(f"{path}.2")
    _decide(path, ["a1", "a2", "a3"])
    _copy(path, one)  # the first rotation, killed before its cut
    _decide(path, ["b1", "b2"])  # reopening cut rows 1..3 and linked FILE.1
    assert _traces([path]) == ["b1", "b2"]
    _copy(path, two)  # the second rotation, killed before its cut
    Journal(path).close()  # opening alone finishes it, before any row is recorded
    assert _traces([path]) == []
    _decide(path, ["c1"])
    assert _traces([path]) == ["c1"]
    _decide(path, ["d1"])  # nothing left to finish: a plain reopen
    files = [one, two, path]
    assert _traces(files) == ["a1", "a2", "a3", "b1", "b2", "c1", "d1"]
    report = verify_files(files)
    assert report.ok and report.rows == 7, report.describe()


def _foreign(path: Path, target: Path) -> None:
    _decide(path.with_name("other.db"), ["o1", "o2", "o3", "o4"])
    _copy(path.with_name("other.db"), target)


def _empty(path: Path, target: Path) -> None:
    Journal(target).close()


def _garbage(path: Path, target: Path) -> None:
    target.write_bytes(b"not a database at all" * 100)


def _outside(path: Path, target: Path) -> None:
    _copy(path, Path(f"{path}.0"))  # FILE.0 and FILE.2 are not the series FILE.1..FILE.n
    _copy(path, Path(f"{path}.2"))


@pytest.mark.fak_theorem("C1.3")
@pytest.mark.parametrize("make", [_foreign, _empty, _garbage, _outside])
def test_a_file_that_is_not_an_unfinished_rotation_of_this_journal_is_left_alone(
    tmp_path: Path, make: Any
) -> None:
    """Reopening cuts no row for a newest file that is not a copy of the live rows (another
    journal's, empty, not a database) or for files outside the unbroken series."""
    tmp_path = fresh(tmp_path)
    path = tmp_path / "j.db"
    _decide(path, ["t1", "t2", "t3", "t4"])
    make(path, Path(f"{path}.1"))
    _decide(path, ["t5"])
    assert _traces([path]) == ["t1", "t2", "t3", "t4", "t5"]
    assert verify_files([path]).ok


@pytest.mark.fak_theorem("C1.3")
def test_the_copy_check_refuses_a_copy_that_is_short_or_does_not_verify(tmp_path: Path) -> None:
    from fak_core.journal import _check_copy  # the check rotation runs before its cut

    tmp_path = fresh(tmp_path)
    path = tmp_path / "j.db"
    k, j = journaled(path)
    for i in range(4):
        k.decide(ToolCall("get_a", "{}", f"t{i}"))
    seq = j.sync()
    head = stored_rows(path)[-1]["hash"]
    j.close()
    for n, sql, problem in (
        (1, None, None),
        (2, "DELETE FROM decisions WHERE seq = 4", "not at the last committed row"),
        (3, "UPDATE decisions SET verdict = 'DENY' WHERE seq = 2", "does not verify"),
    ):
        copy = tmp_path / f"copy{n}.db"
        _copy(path, copy)
        if sql is not None:
            with contextlib.closing(sqlite3.connect(copy)) as c:
                c.execute(sql)
                c.commit()
        found = _check_copy(copy, seq, head)
        assert (found is None) if problem is None else (found is not None and problem in found)


# ------------------------------------------------------------------------------ C1.2
@pytest.mark.fak_theorem("C1.2")
@pytest.mark.parametrize("batch", [1, 3, 256])
def test_close_commits_everything_queued_and_stops_the_writer(tmp_path: Path, batch: int) -> None:
    """Closed while idle, or with the stop arriving behind queued rows (the writer held in
    its commit meanwhile): every row is committed, in order, and the writer thread ends."""
    tmp_path = fresh(tmp_path)
    path = tmp_path / "j.db"
    j = Journal(path, batch=batch)
    j.record_fields({"event": "decide", "trace": "idle"})
    j.sync()
    j.close()  # the writer waits for work: the stop is all it takes
    assert not j._thread.is_alive()
    j = Journal(path, batch=batch)
    with j._cond:  # the writer finishes its first commit only after we let go
        for i in range(7):
            j.record_fields({"event": "decide", "trace": f"q{i}"})
        j._queue.put(None)  # what close() queues first: the stop, behind the rows
    j._thread.join(10)
    assert not j._thread.is_alive()
    j.close()
    assert [r["trace"] for r in stored_rows(path)] == ["idle", *(f"q{i}" for i in range(7))]
    assert verify_files([path]).ok


@pytest.mark.fak_theorem("C1.2")
def test_the_writer_commits_rows_queued_from_many_threads(tmp_path: Path) -> None:
    tmp_path = fresh(tmp_path)
    path = tmp_path / "j.db"
    j = Journal(path, batch=4)

    def record(t: int) -> None:
        for i in range(25):
            j.record_fields({"event": "decide", "trace": f"{t}-{i}"})

    threads = [threading.Thread(target=record, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert j.sync() == 100
    j.close()
    rows = stored_rows(path)
    want = sorted(f"{t}-{i}" for t in range(4) for i in range(25))
    assert sorted(r["trace"] for r in rows) == want
    assert [r["seq"] for r in rows] == list(range(1, 101))
