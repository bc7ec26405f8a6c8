"""pytester tests: the report's commit and dirty flag are what git says, wherever the
report directory is, and unknown when git fails (issue 15)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_fak.provenance import git_info

from .plugin_project import LIB, make_project


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return out.stdout.strip()


def committed_project(pytester: pytest.Pytester) -> str:
    make_project(pytester)
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-qm", "project")
    return git(pytester.path, "rev-parse", "HEAD")


def report_git(report_dir: Path) -> dict[str, Any]:
    git_state: dict[str, Any] = json.loads((report_dir / "verdicts.json").read_text())["git"]
    return git_state


def test_a_modified_anchor_is_dirty_with_the_report_outside_the_repository(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    head = committed_project(pytester)
    outside = tmp_path_factory.mktemp("ci-report")
    assert pytester.runpytest("--fak-theorems", f"--fak-report-dir={outside}").ret == 0
    assert report_git(outside) == {"commit": head, "dirty": False, "error": None}
    (pytester.path / "clamplib.py").write_text(LIB.replace("return hi", "return hi  # edited"))
    pytester.runpytest("--fak-theorems", f"--fak-report-dir={outside}")
    assert report_git(outside) == {"commit": head, "dirty": True, "error": None}
    md = (outside / "PROOFS.md").read_text()
    assert f"commit `{head}` (with uncommitted changes)" in md


def test_the_report_inside_the_repository_does_not_dirty_it(pytester: pytest.Pytester) -> None:
    committed_project(pytester)
    pytester.runpytest("--fak-theorems")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-qm", "proofs")
    pytester.runpytest("--fak-theorems")  # rewrites proofs/ (generated_at changes)
    assert report_git(pytester.path / "proofs")["dirty"] is False
    (pytester.path / "proofs" / "notes.txt").write_text("not the report")
    pytester.runpytest("--fak-theorems")
    assert report_git(pytester.path / "proofs")["dirty"] is True  # only its own files skip


def test_a_project_in_a_subfolder_sees_changes_anywhere_in_the_work_tree(
    pytester: pytest.Pytester,
) -> None:
    committed_project(pytester)
    sub = pytester.path / "sub"
    sub.mkdir()
    (pytester.path / "clamplib.py").write_text(LIB + "\n# edited\n")
    assert git_info(sub)["dirty"] is True


def test_a_failed_git_call_is_unknown_not_clean(pytester: pytest.Pytester) -> None:
    head = committed_project(pytester)
    (pytester.path / ".git" / "index").write_bytes(b"garbage")  # git status now fails
    outside = pytester.path / "out"
    pytester.runpytest("--fak-theorems", f"--fak-report-dir={outside}")
    state = report_git(outside)
    assert state["commit"] == head and state["dirty"] is None
    assert "git status" in state["error"] and "index" in state["error"]
    md = (outside / "PROOFS.md").read_text()
    assert f"commit `{head}` (uncommitted changes unknown: git status" in md


def test_outside_a_git_checkout_nothing_is_claimed(tmp_path: Path) -> None:
    assert git_info(tmp_path) == {"commit": None, "dirty": None, "error": None}
