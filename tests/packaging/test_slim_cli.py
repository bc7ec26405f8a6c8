"""Without the gateway extra, `fak serve` and `fak mcp*` say how to install it (issue 15).

A fresh interpreter hides the gateway's libraries with an import hook, as a slim install
(`pip install pytest-fak`) lacks them; the kernel's own commands keep working.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HIDE = """
import importlib.abc, sys
HIDDEN = {"starlette", "uvicorn", "httpx", "httpx_aiohttp", "aiohttp", "httpx_sse", "mcp",
          "anyio"}
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hide())
from fak_core.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def _fak(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HIDE, *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("serve",),
        ("serve", "--port", "0"),
        ("mcp", "--help"),
        ("mcp-proxy", "--config", "x.toml"),
        ("mcp",),
    ],
)
def test_gateway_commands_say_how_to_install_the_extra(argv: tuple[str, ...]) -> None:
    done = _fak(*argv)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"fak {argv[0]}: the gateway's libraries are not installed" in done.stderr
    assert "pip install 'pytest-fak[gateway]'" in done.stderr


def test_kernel_commands_work_without_the_gateway() -> None:
    done = _fak("decide", "book_reservation", "{}")
    assert done.returncode == 0, done.stderr
    assert '"kind": "ALLOW"' in done.stdout
    assert "could not load" not in done.stderr
    checked = _fak("policy", "check")
    assert checked.returncode == 0 and checked.stdout.startswith("ok: default policy")
