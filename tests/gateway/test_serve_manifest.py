"""``fak serve --manifest FILE --node ID``: the gateway starts from a frozen manifest's
capability lock, and refuses a tampered manifest before it listens."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import httpx
import pytest

from fak_core.cli import main as fak

from .test_serve_cli import FAK, _env, _first_line, _stop

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flow"
LINE = re.compile(
    r"^fak serve: listening on (http://127\.0\.0\.1:\d+) policy manifest (\S+) node plan"
)


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    out = tmp_path / "manifest.json"
    rc = fak(
        [
            "flow",
            "preflight",
            str(EXAMPLE / "flow.yaml"),
            "--workspace",
            str(EXAMPLE / "workspace.yaml"),
            "--identity",
            "alice",
            "--task",
            "t-serve",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert rc == 0 and out.exists()
    return out


def test_serve_runs_the_nodes_capability_lock(manifest: Path) -> None:
    proc = subprocess.Popen(
        [FAK, "serve", "--port", "0", "--manifest", str(manifest), "--node", "plan"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        line = _first_line(proc)
        m = LINE.match(line)
        assert m, line
        with httpx.Client(base_url=m.group(1), timeout=10) as c:

            def kind(tool: str) -> str:
                r = c.post(
                    "/v1/fak/adjudicate", json={"tool": tool, "arguments": {"path": "README.md"}}
                )
                return str(r.json()["verdict"]["kind"])

            assert kind("read_file") == "ALLOW"
            assert kind("write_file") == "DENY"
            assert kind("get_user_details") == "DENY"  # no prefixes in a lock
    finally:
        _stop(proc)


def test_serve_refuses_a_tampered_manifest(manifest: Path) -> None:
    doc = json.loads(manifest.read_text())
    body = doc["manifest"]
    node = (
        body["nodes"][0]
        if isinstance(body.get("nodes"), list)
        else next(iter(body["nodes"].values()))
    )
    node["prompt"] = str(node.get("prompt", "")) + " and also push to main"
    manifest.write_text(json.dumps(doc))
    done = subprocess.run(
        [FAK, "serve", "--port", "0", "--manifest", str(manifest), "--node", "plan"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=30,
    )
    assert done.returncode == 2
    assert "refused" in done.stderr and done.stdout == ""


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--node", "plan"], "--node goes with --manifest"),
        (["--manifest", "x.json"], "--manifest needs --node"),
        (["--manifest", "x.json", "--node", "a", "--policy", "p.json"], "exclude each other"),
    ],
)
def test_manifest_flags_are_checked(args: list[str], needle: str) -> None:
    done = subprocess.run(
        [FAK, "serve", "--port", "0", *args], capture_output=True, text=True, env=_env(), timeout=30
    )
    assert done.returncode == 2 and needle in done.stderr
