"""``fak flow`` through the installed console script (entry point group ``fak.commands``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .flowdata import EXAMPLE

FAK = shutil.which("fak", path=os.path.dirname(sys.executable)) or shutil.which("fak")


def fak(*args: str) -> subprocess.CompletedProcess[str]:
    assert FAK is not None, "the fak console script is not installed"
    return subprocess.run([FAK, *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def manifest(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("flow") / "manifest.json"
    done = fak(
        "flow",
        "preflight",
        str(EXAMPLE / "flow.yaml"),
        "--workspace",
        str(EXAMPLE / "workspace.yaml"),
        "--identity",
        "alice",
        "--task",
        "t-cli",
        "--out",
        str(out),
    )
    return out, done


def test_preflight_writes_manifest_and_digest_and_shows_progress(
    manifest: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, done = manifest
    assert done.returncode == 0, done.stderr
    digest = json.loads(out.read_text())["digest"]
    assert done.stdout.strip() == f"{digest}  {out}"
    assert out.with_name("manifest.json.sha256").read_text().strip() == digest
    for n, step in enumerate(("resolve-inputs", "compile", "digest")):
        assert f"{step}: passed" in done.stderr, n
    assert done.stderr.index("resolve-inputs ...") < done.stderr.index("digest: passed")


def test_verify_and_show(manifest: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = manifest
    ok = fak("flow", "verify", str(out))
    assert ok.returncode == 0
    assert ok.stdout.startswith("ok: ")
    show = fak("flow", "show", str(out))
    assert show.returncode == 0, show.stderr
    view = json.loads(show.stdout)
    assert [n["id"] for n in view["nodes"]] == ["plan", "implement", "review"]
    assert "private execution layer" in view["nodes"][0]["private_execution_layer"]
    assert "ACME platform agent" not in show.stdout


def test_tampered_manifest_is_refused(
    manifest: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    out, _ = manifest
    bad = tmp_path / "bad.json"
    bad.write_text(out.read_text().replace('"gpt-5"', '"gpt-4o"'))
    for action in ("verify", "show"):
        done = fak("flow", action, str(bad))
        assert done.returncode == 1
        assert json.loads(done.stdout)["findings"][0]["code"] == "DIGEST_MISMATCH"
    wrong = fak("flow", "verify", str(out), "--digest", "sha256:" + "0" * 64)
    assert wrong.returncode == 1


def test_failed_preflight_prints_structured_result_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    done = fak(
        "flow",
        "preflight",
        str(EXAMPLE / "flow.yaml"),
        "--workspace",
        str(EXAMPLE / "workspace.yaml"),
        "--identity",
        "bob",
        "--out",
        str(out),
        "--quiet",
    )
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["ok"] is False
    assert result["repair"]["step"] == "reauthorise"
    assert [s["status"] for s in result["steps"]][-2:] == ["skipped", "skipped"]
    assert "preflight failed at step 5" in done.stderr
    assert not out.exists()


def test_unreadable_manifest_is_a_usage_error(tmp_path: Path) -> None:
    f = tmp_path / "x.json"
    f.write_text("nope")
    done = fak("flow", "verify", str(f))
    assert done.returncode == 2
    assert "not a JSON manifest" in done.stderr
