"""The mutant cache forgets what another build of the plugin wrote.

Every entry's key holds the plugin build (its version and code digest), so an entry an
older build wrote can never be hit again; it used to stay in the file for good whenever its
anchor and witness were unchanged. Each entry now records its build, and writing the file
drops the entries of every other build (rows of the older file format, which recorded none,
included), while a run of the same build keeps and hits all of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_fak import __version__

from .plugin_project import make_project
from .test_plugin_generated import EXACT, _generated

ARGS = ("--fak-theorems", "--fak-mutate=incremental", "--fak-fail-on=none", "--fak-report-dir=r")


def _cache(pytester: pytest.Pytester) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        Path(pytester.path / ".fak-cache" / "mutants.json").read_text()
    )
    return doc


def test_entries_of_another_plugin_build_are_dropped_and_this_builds_kept(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester, witness=EXACT)
    assert pytester.runpytest(*ARGS).ret == 0
    first = _cache(pytester)
    rows = first["entries"]
    assert rows and first["schema"] == "pytest-fak/mutant-cache/v2"
    builds = {row[5] for row in rows.values()}
    assert len(builds) == 1 and all(len(row) == 6 for row in rows.values())
    (build,) = builds
    assert build.startswith(f"{__version__} (")  # "<version> (<code digest>)"
    # an entry of another build, and one in the older format (no build recorded)
    k0, row0 = next(iter(rows.items()))
    other = {"a" * 64: [*row0[:5], "0.0.1 (0000000000000000)"], "b" * 64: row0[:5]}
    doc = {**first, "entries": {**rows, **other}}
    (pytester.path / ".fak-cache" / "mutants.json").write_text(json.dumps(doc))
    assert pytester.runpytest(*ARGS).ret == 0
    assert _generated(pytester, "r")["runs"] == 0  # this build's entries all hit
    again = _cache(pytester)["entries"]
    assert set(again) == set(rows) and again[k0] == row0
    assert not set(other) & set(again)


def test_a_file_in_the_older_format_still_hits_and_is_rewritten_with_its_build(
    pytester: pytest.Pytester,
) -> None:
    """Its rows still hit when their key matches (the key holds the build), and are
    written back with the build recorded."""
    make_project(pytester, witness=EXACT)
    assert pytester.runpytest(*ARGS).ret == 0
    rows = _cache(pytester)["entries"]
    old = {"schema": "pytest-fak/mutant-cache/v1", "entries": {k: r[:5] for k, r in rows.items()}}
    (pytester.path / ".fak-cache" / "mutants.json").write_text(json.dumps(old))
    assert pytester.runpytest(*ARGS).ret == 0
    assert _generated(pytester, "r")["runs"] == 0
    assert _cache(pytester)["entries"] == rows
