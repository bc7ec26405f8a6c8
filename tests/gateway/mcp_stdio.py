"""A raw-line driver of a ``fak mcp`` stdio subprocess, and the MCP handshake's frames.

Shared by the tests that write frames the SDK client would never send (malformed JSON,
batches, wrong versions): each line written is one frame, each line read one message.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

TIMEOUT = 20
#: the protocol revision the handshake asks for
PROTOCOL = "2025-06-18"


def init_frame(client: str, request_id: int = 0) -> dict[str, Any]:
    """An ``initialize`` request from a client named ``client``."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": client, "version": "1"},
        },
    }


class Stdio:
    """``fak mcp`` with raw lines in and a queue of parsed lines out."""

    def __init__(self, policy: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fak_core.gateway.mcp_cli", "--policy", str(policy)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.ids = itertools.count(1_000_000)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, frame: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(frame + b"\n")
        self.proc.stdin.flush()

    def recv(self) -> dict[str, Any]:
        line = self.lines.get(timeout=TIMEOUT)
        assert line, "the MCP server closed its stdout"
        return dict(json.loads(line))

    def handshake(self, client: str, request_id: int = 0) -> None:
        """``initialize`` as ``client``, check the server names itself, then ``initialized``."""
        self.send(json.dumps(init_frame(client, request_id)).encode())
        assert self.recv()["result"]["serverInfo"]["name"] == "fak-gateway"
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def exchange(self, frame: bytes, answer_id: Any = None) -> list[dict[str, Any]]:
        """Send ``frame`` then a ping; every message until the ping's reply has come and,
        when ``answer_id`` is given, the reply with that id (requests are served
        concurrently, so a slow reply may follow the ping's)."""
        self.send(frame)
        ping = next(self.ids)
        self.send(json.dumps({"jsonrpc": "2.0", "id": ping, "method": "ping"}).encode())
        got: list[dict[str, Any]] = []
        pinged, answered = False, answer_id is None
        while not (pinged and answered):
            msg = self.recv()
            if msg.get("id") == ping and "result" in msg:
                assert msg["result"] == {}
                pinged = True
                continue
            got.append(msg)
            answered = answered or msg.get("id") == answer_id
        return got

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            assert self.proc.stdout is not None
            self.proc.stdout.close()
