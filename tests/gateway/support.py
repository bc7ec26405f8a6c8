"""Shared pieces for the gateway tests: a kernel with test tools, and a real uvicorn server."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette

from fak_core import Kernel, Verdict, parse_policy
from fak_core.view import CallView

#: A policy for the gateway tests: the built-in shape plus an allowed egress tool.
POLICY_DOC: dict[str, Any] = {
    "version": "fak-policy/v1",
    "allow": ["get_user_details", "search_flights", "send_email", "wire_money", "echo"],
    "allow_prefix": ["read_", "get_"],
    "deny": {"shell_rm_rf": "POLICY_BLOCK", "exfiltrate": "SECRET_EXFIL"},
    "redact_fields": ["password", "api_key"],
}

WITNESS_CLAIM = "a second person approved this transfer"


def require_witness_for_wire_money(view: CallView) -> Verdict:
    """A test adjudicator: wire_money needs a witness (REQUIRE_WITNESS)."""
    return Verdict.require_witness(WITNESS_CLAIM, "test/witness-gate")


def make_kernel() -> Kernel:
    kernel = Kernel(parse_policy(POLICY_DOC))
    kernel.register_tool("echo", lambda args: {"echo": args}, source="untrusted")
    kernel.register_tool("get_user_details", lambda args: {"user": args.get("user_id", "")})
    kernel.register_schema(
        "search_flights",
        {
            "type": "object",
            "required": ["origin"],
            "properties": {"origin": {"type": "string", "minLength": 3}},
        },
    )
    kernel.add_adjudicator(require_witness_for_wire_money, 50, tools=["wire_money"])
    return kernel


class LiveServer:
    """An app served by uvicorn on 127.0.0.1, on a port the kernel picked."""

    def __init__(self, app: Starlette) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
        self.server = uvicorn.Server(config)
        self.server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start within 10 s")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
        assert not self.thread.is_alive(), "uvicorn did not stop within 10 s"


__all__ = ["POLICY_DOC", "WITNESS_CLAIM", "LiveServer", "make_kernel"]
