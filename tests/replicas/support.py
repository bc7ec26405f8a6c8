"""Real parts for the replica tests: a redis-server of our own and ``fak serve`` processes.

Nothing here touches the system's Redis service: each :class:`RedisServer` runs Debian's
``redis-server`` binary on a free loopback port, in a temporary directory, with the
settings the gateway requires (``appendonly yes``, ``maxmemory-policy noeviction``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fak_core.redis_state import RedisState
from tests.gateway_proxies.clients import HEADERS as SESSION_HEADERS

MISSING = (
    "redis-server is not installed: the replica tests run a real Redis on a loopback port; "
    "install it (Debian: apt-get install -y redis-server; .ci/run does this)"
)
REPO = Path(__file__).resolve().parents[2]
JSON = {"Content-Type": "application/json"}
_CLOSE: list[RedisState] = []


@pytest.fixture(autouse=True)
def close_states() -> Iterator[None]:
    """Closes every :func:`shared_state` the test opened (autouse where imported)."""
    yield
    while _CLOSE:
        _CLOSE.pop().close()


def closing(state: RedisState) -> RedisState:
    """``state``, closed after the test by :func:`close_states`."""
    _CLOSE.append(state)
    return state


def shared_state(url: str, timeout: float = 0.5) -> RedisState:
    """A checked connection to the shared Redis at ``url``, closed after the test."""
    state = RedisState(url, timeout=timeout)
    state.check()
    return closing(state)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process; :meth:`stop` and :meth:`start` keep its port and data."""

    def __init__(self, directory: Path, **settings: str) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.fail(MISSING)
        self.exe = exe
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.settings = {
            "appendonly": "yes",
            "appendfsync": "everysec",
            "maxmemory-policy": "noeviction",
            "save": "",
            **settings,
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir)]
        for key, value in self.settings.items():
            args += [f"--{key}", value]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.ping():
                return
            if self.proc.poll() is not None:
                pytest.fail(f"redis-server exited at start ({self.proc.returncode})")
            time.sleep(0.02)
        pytest.fail("redis-server did not answer PING within 10 s")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM (the append-only file is flushed), and wait."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
        self.proc = None

    def command(self, *args: str) -> str:
        exe = shutil.which("redis-cli")
        assert exe is not None, MISSING
        out = subprocess.run(
            [exe, "-p", str(self.port), *args], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()


class Replica:
    """One ``fak serve --state`` process on a free loopback port."""

    def __init__(
        self,
        state_url: str,
        replica: str,
        *extra: str,
        env: dict[str, str] | None = None,
        wait: bool = True,
    ):
        self.replica = replica
        cmd = [
            sys.executable,
            "-m",
            "fak_core.gateway.cli",
            "--port",
            "0",
            "--state",
            state_url,
            "--replica-id",
            replica,
            *extra,
        ]
        environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, env=environment
        )
        self.url = ""
        if wait:
            self.ready()

    def ready(self) -> Replica:
        """Wait for the start-up line; the replica then serves at :attr:`url`."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.stop()
            self.log.seek(0)
            raise RuntimeError(f"fak serve {self.replica} did not start: {line}{self.log.read()}")
        self.url = line.split("listening on ", 1)[1].split()[0]
        # the test run's user, as the SDK clients of tests.gateway_proxies.clients are: its
        # session token on every request, so a trace it opened stays its own on every replica
        self.client = httpx.Client(base_url=self.url, timeout=10, headers=SESSION_HEADERS)
        return self

    def post(self, path: str, body: dict[str, Any], **headers: str) -> dict[str, Any]:
        r = self.client.post(path, content=json.dumps(body), headers={**JSON, **headers})
        assert r.status_code == 200, (r.status_code, r.text)
        out: dict[str, Any] = r.json()
        return out

    def admit(self, trace: str, tool: str, result: str) -> dict[str, Any]:
        return self.post("/v1/fak/admit", {"tool": tool, "trace_id": trace, "result": result})

    def adjudicate(self, trace: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        body = {"tool": tool, "trace_id": trace, "arguments": arguments}
        verdict: dict[str, Any] = self.post("/v1/fak/adjudicate", body)["verdict"]
        return verdict

    def health(self) -> dict[str, Any]:
        out: dict[str, Any] = self.client.get("/healthz").json()
        return out

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stderr(self) -> str:
        """Everything the process wrote to its standard error so far."""
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
