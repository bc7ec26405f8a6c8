"""The mutant cache forgets what another build of the plugin wrote.

The file records the build and budget its results were made under (the plugin's version
and code digest, Hypothesis's version, the example and memory budgets). A run of another
build does not read it, says so, and writes a file of its own build; a run of the same
build reuses every result.
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


def test_a_file_of_another_build_is_not_read_and_is_replaced_by_this_builds(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester, witness=EXACT)
    assert pytester.runpytest(*ARGS).ret == 0
    first = _cache(pytester)
    assert first["schema"] == "pytest-fak/mutant-cache/v3" and first["mutants"]
    assert first["build"].startswith(f"pytest-fak {__version__} (")
    other = {**first, "build": "pytest-fak 0.0.1 (0000000000000000); hypothesis 6.0.0"}
    (pytester.path / ".fak-cache" / "mutants.json").write_text(json.dumps(other))
    res = pytester.runpytest(*ARGS)
    assert res.ret == 0
    assert "mutant cache not used" in res.stdout.str()
    assert _generated(pytester, "r")["cache_hits"] == 0
    assert _cache(pytester) == first  # rewritten under this build, the same results
    assert pytester.runpytest(*ARGS).ret == 0
    assert _generated(pytester, "r")["runs"] == 0  # this build's results all hit


def test_a_file_of_the_older_format_is_not_read(pytester: pytest.Pytester) -> None:
    make_project(pytester, witness=EXACT)
    old = {"schema": "pytest-fak/mutant-cache/v2", "entries": {"a" * 64: ["killed"] * 6}}
    (pytester.path / ".fak-cache").mkdir()
    (pytester.path / ".fak-cache" / "mutants.json").write_text(json.dumps(old))
    res = pytester.runpytest(*ARGS)
    assert res.ret == 0 and "older format" in res.stdout.str()
    assert _cache(pytester)["schema"] == "pytest-fak/mutant-cache/v3"
