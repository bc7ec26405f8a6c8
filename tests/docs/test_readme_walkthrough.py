"""The README's walk-throughs run as written (issue 31: docs a newcomer can follow).

Every fenced block of ``README.md`` carries a marker comment on the line before it that
says what this test does with it:

- ``<!-- walkthrough: python -->``: run with this environment's Python; every line of the
  block that is a whole comment (``# ...``) is its expected output, in order.
- ``<!-- walkthrough: file PATH -->``: written to ``PATH`` in the downstream project (a
  fresh temporary folder).
- ``<!-- walkthrough: run -->`` (or ``run, fails``): run by ``bash -e`` in that folder, with
  this environment's ``bin`` first on ``PATH``; it must exit 0 (or, ``fails``, non-zero).
- ``<!-- walkthrough: output -->``: each of its lines must be a line of what the run before
  it printed, in order.
- ``<!-- walkthrough: skip (WHY) -->``: not run here (the two commands: CI runs them).

A block without a marker, or a marker this test does not know, fails the test: no block of
the README goes unchecked by accident.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKER = re.compile(r"^<!-- walkthrough: (?P<kind>[a-z]+(?:, fails)?)(?: (?P<arg>.*?))? -->$")
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the walk-through is POSIX sh")


@dataclass(frozen=True)
class Block:
    kind: str  # python, file, run, "run, fails", output or skip
    arg: str  # the file's path (file), else ""
    text: str  # the block's content
    line: int  # the README line of its opening fence


def blocks(readme: str) -> list[Block]:
    """Every fenced block of the README with the marker before it; an error for any
    block without one (only top-level fences: no block of the README is indented)."""
    lines = readme.splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j] == "```"), None)
        assert end is not None, f"README.md:{i + 1}: a code block that is never closed"
        marker = MARKER.match(lines[i - 1]) if i else None
        assert marker, (
            f"README.md:{i + 1}: a code block without a walkthrough marker on the line before "
            "it (python, file PATH, run, output or skip (WHY)): every block is checked"
        )
        kind, arg = marker["kind"], marker["arg"] or ""
        known = {"python", "file", "run", "run, fails", "output", "skip"}
        assert kind in known, f"README.md:{i}: unknown walkthrough marker {kind!r}"
        assert (kind == "file") == bool(arg) or kind == "skip", f"README.md:{i}: {lines[i - 1]}"
        out.append(Block(kind, arg, "\n".join(lines[i + 1 : end]) + "\n", i + 1))
        i = end + 1
    return out


def _env() -> dict[str, str]:
    """This environment's tools first on PATH, and nothing of this test run's own settings
    (pytest's, xdist's, coverage's subprocess hooks, Hypothesis's profile)."""
    skip = ("PYTEST", "PYTHON", "VIRTUAL_ENV", "COV_CORE", "HYPOTHESIS", "GITHUB_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _in_order(expected: list[str], printed: str, where: str) -> None:
    lines = [line.rstrip() for line in printed.splitlines()]
    at = 0
    for want in expected:
        found = next((k for k in range(at, len(lines)) if lines[k] == want), None)
        assert found is not None, f"{where}: expected the line {want!r} in order in:\n{printed}"
        at = found + 1


def test_every_readme_block_is_checked() -> None:
    found = blocks(README.read_text("utf-8"))
    kinds = [b.kind for b in found]
    # the two commands, the first decision, and the ten-minute project (its files, a run
    # that proves, one that fails, and the output of each)
    assert kinds.count("skip") == 1, kinds
    assert kinds.count("python") >= 1, kinds
    assert kinds.count("file") >= 5, kinds
    assert "run" in kinds and "run, fails" in kinds, kinds
    for i, block in enumerate(found):
        if block.kind == "output":
            assert i and found[i - 1].kind.startswith("run"), (
                f"README.md:{block.line}: an output block must follow a run block"
            )


def test_the_readme_walkthroughs_run_as_written(tmp_path: Path) -> None:
    env = _env()
    project = tmp_path / "refunds"
    project.mkdir()
    printed = ""
    ran = 0
    for block in blocks(README.read_text("utf-8")):
        where = f"README.md:{block.line}"
        if block.kind == "python":
            done = subprocess.run(
                [sys.executable, "-c", block.text],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, f"{where}:\n{done.stdout}{done.stderr}"
            expected = [ln[2:] for ln in block.text.splitlines() if ln.startswith("# ")]
            assert expected, f"{where}: a python block shows its output as '# ' lines"
            _in_order(expected, done.stdout, where)
            ran += 1
        elif block.kind == "file":
            path = project / block.arg
            assert project in path.resolve().parents, f"{where}: {block.arg} leaves the project"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.text, "utf-8")
        elif block.kind.startswith("run"):
            done = subprocess.run(
                ["bash", "-e", "-c", block.text],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            printed = done.stdout + done.stderr
            if block.kind == "run":
                assert done.returncode == 0, f"{where}: exit {done.returncode}:\n{printed}"
            else:
                assert done.returncode != 0, f"{where}: was to fail, exit 0:\n{printed}"
            ran += 1
        elif block.kind == "output":
            _in_order(block.text.splitlines(), printed, where)
    assert ran >= 3
