"""Loopback ports for the proxy tests (apps are served with ``pytest_fak.fixtures.serve_app``)."""

from __future__ import annotations

import socket


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
