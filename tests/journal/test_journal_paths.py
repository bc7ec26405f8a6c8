"""A journal is written, read and verified at the name it was given, whatever that name holds.

SQLite reads a ``file:`` name as a URI: an unencoded ``?`` starts its query, ``#`` its
fragment, ``%XX`` is decoded, and (on a build with ``SQLITE_USE_URI``) even a plain name
starting with ``file:`` is a URI. The witnesses give journals names made of those
characters, beside decoy journals at the names a raw URI would be misread as (the name cut
at ``?`` or ``#``, the name percent-decoded), and check from the directory listing and from
the rows (hashes recomputed with ``hashlib``) that every file was written and read as named.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import urllib.parse

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fak_core.journal import GENESIS, Journal, read_rows, verify_files

FIELDS = ("seq", "ts", "event", "trace", "tool", "args_digest", "verdict", "reason", "by")

# names from the characters a URI gives meaning to, and ordinary ones
NAMES = st.text(alphabet="ab?#%3F2 :=&;x", min_size=1, max_size=10).filter(
    lambda s: s.strip() == s and s not in (".", "..")
)


def _row(tag: str, i: int) -> dict[str, str]:
    return {
        "event": "decide",
        "trace": f"{tag}-{i}",
        "tool": "t",
        "args_digest": "d",
        "verdict": "ALLOW",
        "reason": tag,
        "by": "k",
    }


def _write(name: str, tag: str, rows: int, *, rotate: bool) -> None:
    """Write ``rows`` rows tagged ``tag`` to the journal ``name`` (relative to the cwd)."""
    j = Journal(name, rotate_bytes=1 if rotate else 0)
    try:
        for i in range(rows):
            j.record_fields(_row(tag, i))
            j.sync()
    finally:
        j.close()


def _series(name: str) -> list[str]:
    """``name.1 .. name.n, name``: the rotated files present, oldest first, then the live one."""
    out, n = [], 1
    while os.path.exists(f"{name}.{n}"):
        out.append(f"{name}.{n}")
        n += 1
    return [*out, name]


def _check_rows(files: list[str], tag: str, rows: int) -> None:
    """The series holds exactly rows 1..``rows`` tagged ``tag``, each hash recomputed here."""
    got = [r for f in files for r in read_rows(f)]
    assert [r["seq"] for r in got] == list(range(1, rows + 1))
    prev = GENESIS
    for i, r in enumerate(got):
        assert r["trace"] == f"{tag}-{i}" and r["reason"] == tag
        body = json.dumps({k: r[k] for k in FIELDS}, sort_keys=True, separators=(",", ":"))
        assert r["prev_hash"] == prev
        prev = hashlib.sha256((prev + body).encode("utf-8")).hexdigest()
        assert r["hash"] == prev
    report = verify_files(files)
    assert report.ok and report.rows == rows, report


def _decoys(name: str) -> set[str]:
    """The names a raw ``file:NAME?mode=ro`` URI would be read as, other than ``name``."""
    cut = name.split("?")[0].split("#")[0]
    out = {cut, urllib.parse.unquote(name, errors="strict")} if _decodes(name) else {cut}
    if name.startswith("file:"):
        out.add(name[len("file:") :])
    return {d for d in out if d and d.strip() == d and d not in (name, ".", "..")}


def _decodes(name: str) -> bool:
    try:
        urllib.parse.unquote(name, errors="strict")
    except UnicodeDecodeError:
        return False
    return True


def _expected_files(names: set[str]) -> None:
    """Every file in the cwd belongs to one of the journals ``names`` (no stray file)."""
    allowed = {"", "-wal", "-shm", "-journal"}
    for entry in os.listdir("."):
        owner = [n for n in names if entry.startswith(n) and _suffix_ok(entry[len(n) :], allowed)]
        assert owner, f"stray file {entry!r} beside journals {sorted(names)}"


def _suffix_ok(rest: str, allowed: set[str]) -> bool:
    if rest in allowed:
        return True
    return rest.startswith(".") and rest[1:].isdigit()


def _scenario(name: str, rows: int, *, rotate: bool) -> None:
    with tempfile.TemporaryDirectory() as d, contextlib.chdir(d):
        decoys = _decoys(name)
        for k, decoy in enumerate(sorted(decoys)):
            if os.path.dirname(decoy) == "":
                _write(decoy, f"decoy{k}", 2, rotate=False)
        _write(name, "real", rows, rotate=rotate)
        _check_rows(_series(name), "real", rows)
        if rotate:
            assert len(_series(name)) >= 2
        for k, decoy in enumerate(sorted(decoys)):
            _check_rows([decoy], f"decoy{k}", 2)
        _expected_files({name, *decoys})
        # reopening continues the same chain at the same file
        _write(name, "real", 0, rotate=False)
        j = Journal(name)
        try:
            j.record_fields(_row("real", rows))
            j.sync()
        finally:
            j.close()
        _check_rows(_series(name), "real", rows + 1)
        _expected_files({name, *decoys})


NAMED = ("a?b.db", "a#b.db", "a%3Fb.db", "x%20y z", "file:x.db", "a?mode=rw", "file:a?b#c%23")


@pytest.mark.fak_theorem("C1.1")
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=NAMES)
@example(name=NAMED[0])
@example(name=NAMED[1])
@example(name=NAMED[2])
@example(name=NAMED[3])
@example(name=NAMED[6])
def test_rotated_series_is_read_and_verified_at_its_names(name: str) -> None:
    _scenario(name, 3, rotate=True)


@pytest.mark.fak_theorem("C1.2")
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=NAMES)
@example(name=NAMED[4])
@example(name=NAMED[5])
@example(name=NAMED[6])
@example(name=NAMED[2])
def test_journal_is_written_and_reopened_at_its_name(name: str) -> None:
    _scenario(name, 2, rotate=False)


def test_names_reach_every_uri_character() -> None:
    """Unbound check of the test data: the named cases hold each character a URI reads."""
    for ch in ("?", "#", "%", " ", "file:"):
        assert any(ch in n for n in NAMED), ch
