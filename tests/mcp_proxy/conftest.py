"""Fixtures for the MCP proxy tests: real downstream servers as subprocesses, real clients."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from fak_core import Event, Kernel, Policy
from fak_core.gateway.mcp_downstream import DownstreamSpec
from fak_core.gateway.mcp_proxy import McpProxy

SERVERS = Path(__file__).with_name("mcp_servers.py")
TOOLS = ("read_file", "fetch_url", "send_email", "hang", "crash")
POLICY = Policy(allow=TOOLS, redact_fields=("password",))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Downstream:
    """Where a downstream test server records what reached it."""

    dir: Path
    call_log: Path = field(init=False)
    outbox: Path = field(init=False)

    def __post_init__(self) -> None:
        self.call_log = self.dir / "calls.jsonl"
        self.outbox = self.dir / "outbox.jsonl"

    @property
    def env(self) -> dict[str, str]:
        return {"MCP_CALL_LOG": str(self.call_log), "MCP_OUTBOX": str(self.outbox)}

    def spec(
        self, name: str = "tools", mode: str = "tools", timeout: float = 10.0
    ) -> DownstreamSpec:
        return DownstreamSpec(
            name, command=sys.executable, args=(str(SERVERS), mode), env=self.env, timeout=timeout
        )

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.call_log.exists():
            return []
        rows = [json.loads(line) for line in self.call_log.read_text().splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    def mails(self) -> list[dict[str, Any]]:
        if not self.outbox.exists():
            return []
        return [json.loads(line) for line in self.outbox.read_text().splitlines()]


@pytest.fixture(scope="module")
def downstream(tmp_path_factory: pytest.TempPathFactory) -> Downstream:
    return Downstream(tmp_path_factory.mktemp("downstream"))


@asynccontextmanager
async def running_proxy(
    specs: list[DownstreamSpec], policy: Policy = POLICY, *, pin: bool = False, **kw: Any
) -> AsyncIterator[tuple[McpProxy, list[Event]]]:
    """A running proxy; with ``pin`` the operator has pinned every tool its servers list
    now (as ``fak mcp-proxy --print-pins`` writes them), so listing them leaves a session
    clean; without, their metadata is untrusted text that taints the listing session."""
    events: list[Event] = []
    kernel = kw.pop("kernel", None) or Kernel(policy)
    async with McpProxy(kernel, specs, journal=events.append, **kw) as proxy:
        if pin:
            proxy.pins = await proxy.current_pins()
        yield proxy, events


@asynccontextmanager
async def session(proxy: McpProxy) -> AsyncIterator[Client]:
    """One client connection through the official SDK client: one proxy session."""
    async with Client(proxy.server, cache=None) as client:
        yield client


@pytest.fixture(scope="module")
async def shared(downstream: Downstream) -> AsyncIterator[tuple[McpProxy, list[Event]]]:
    """One proxy over one tools server (its tools pinned), shared by the tests that do not
    break it."""
    async with running_proxy([downstream.spec()], pin=True) as pair:
        yield pair


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    p = tmp_path / "notes" / "meeting"
    p.parent.mkdir()
    p.write_text("Meeting moved to Thursday at 10.", encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def http_server(downstream: Downstream) -> Iterator[str]:
    """The tools server over streamable HTTP on an ephemeral loopback port (a subprocess)."""
    import os
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, str(SERVERS), "tools-http"],
        stdout=subprocess.PIPE,
        env={**os.environ, **downstream.env},
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the server prints its port once it listens
        if not line.startswith("PORT "):
            raise RuntimeError(f"HTTP test server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
