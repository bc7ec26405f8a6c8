"""``fak serve`` end to end: the real CLI in a subprocess on port 0, hit over HTTP, stopped."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from fak_core.policy import load_policy, policy_digest

FAK = shutil.which("fak", path=os.path.dirname(sys.executable)) or "fak"
LINE = re.compile(
    r"^fak serve: listening on (http://127\.0\.0\.1:(\d+)) policy (\S+) (sha256:\w+)$"
)


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.getcwd(), **extra}


def _first_line(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()))  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    assert box, "fak serve printed nothing"
    return box[0].strip()


def _stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.stderr is not None:
            err = proc.stderr.read()
            proc.stderr.close()
            assert "Traceback" not in err, err


def test_fak_serve_on_port_zero(policy_file: Path) -> None:
    proc = subprocess.Popen(
        [
            FAK,
            "serve",
            "--port",
            "0",
            "--policy",
            str(policy_file),
            "--tools",
            "tests.gateway.sample_tools",
            "--api-key-env",
            "FAK_TEST_KEY",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(FAK_TEST_KEY="sekrit"),
    )
    try:
        line = _first_line(proc)
        m = LINE.match(line)
        assert m, line
        url, port, source, digest = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        assert port > 0
        assert source == str(policy_file)
        assert digest == policy_digest(load_policy(policy_file))
        with httpx.Client(base_url=url, timeout=10) as c:
            health = c.get("/healthz")
            assert health.status_code == 200
            assert health.json()["ok"] is True
            assert health.json()["tools"] == 2
            assert c.post("/v1/fak/syscall", json={"tool": "echo"}).status_code == 401
            r = c.post(
                "/v1/fak/syscall",
                json={"tool": "echo", "arguments": {"a": 1}},
                headers={"Authorization": "Bearer sekrit"},
            )
            assert r.json()["verdict"]["kind"] == "ALLOW"
            assert r.json()["result"]["content"] == '{"echo":{"a":1}}'
    finally:
        rc = _stop(proc)
    # uvicorn shuts down gracefully, then re-raises the SIGTERM it captured
    assert rc in (0, -signal.SIGTERM)


def test_fak_serve_built_in_policy_line() -> None:
    proc = subprocess.Popen(
        [FAK, "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        m = LINE.match(_first_line(proc))
        assert m
        assert m.group(3) == "built-in"
    finally:
        _stop(proc)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--api-key-env", "FAK_SURELY_UNSET_VAR"], "FAK_SURELY_UNSET_VAR is not set"),
        (["--policy", "/nonexistent/policy.json"], "cannot read policy file"),
        (["--tools", "no_such_module_xyz"], "cannot import it"),
        (["--max-tool-calls", "0"], "--max-tool-calls must be at least 1"),
        (["--decide-timeout", "0"], "--decide-timeout must be a positive number"),
        (["--decide-timeout", "nan"], "--decide-timeout must be a positive number"),
        (["--tool-timeout", "-1"], "--tool-timeout must be a positive number"),
    ],
)
def test_fak_serve_refuses_to_start_with_a_clear_message(args: list[str], needle: str) -> None:
    env = _env()
    env.pop("FAK_SURELY_UNSET_VAR", None)
    done = subprocess.run(
        [FAK, "serve", "--port", "0", *args], capture_output=True, text=True, env=env, timeout=30
    )
    assert done.returncode == 2
    assert needle in done.stderr
    assert done.stdout == ""


def test_bound_socket_says_tcp_so_asyncio_sets_nodelay() -> None:
    # A listener created with proto 0 makes asyncio skip TCP_NODELAY on accepted sockets,
    # and every response then waits ~40 ms for a delayed ACK.
    import socket

    from fak_core.gateway.cli import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockname()[1] > 0
    finally:
        sock.close()
