"""The examples/airline project runs its own theorem and the bundled pack in proof mode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "airline"


def test_airline_example_proves_its_theorem_and_the_pack(pytester: pytest.Pytester) -> None:
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True)
    shutil.rmtree(pytester.path / "proofs", ignore_errors=True)
    pytester.syspathinsert()
    result = pytester.runpytest(
        "--fak-theorems", "--fak-pack", "--fak-max-examples=15", "--fak-mutant-examples=10"
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["fak: 6 PROVEN · 0 REFUTED · 0 VACUOUS · 0 OPEN"])
    data = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    air = next(t for t in data["theorems"] if t["id"] == "AIR1.1")
    assert air["mutants"][0]["status"] == "killed"
    assert [(a["symbol"], a["covered"]) for a in air["anchors"]] == [
        ("airline_rules:BaggageLimit.adjudicate", True)
    ]


def test_airline_example_runs_with_the_plugin_disabled(pytester: pytest.Pytester) -> None:
    # its conftest implements pytest_fak_make_kernel as an optional hook: `-p no:fak`
    # must not stop on "unknown hook" (the fak fixtures are then absent, so collect only)
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True)
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "no:fak", "--co", "-q")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*test_allowed_bookings_carry_at_most_three_bags*"])
    result.stdout.no_fnmatch_line("*unknown hook*")
