"""``fak mcp``: serve the kernel's MCP tools over stdio (one JSON-RPC message per line).

Registered through the ``fak.commands`` entry point. stdout carries only protocol
frames; diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "register", "run_mcp"]


def register(subparsers: Any) -> None:
    """Add ``mcp`` to the ``fak`` command line."""
    p = subparsers.add_parser("mcp", help="serve the MCP tools over stdio")
    p.add_argument("--policy", metavar="FILE", help="policy file; default: the built-in one")
    p.add_argument("--tools", metavar="MODULE", help="module or .py file exposing TOOLS")
    p.set_defaults(func=run_mcp)


def run_mcp(ns: argparse.Namespace) -> int:
    """Serve until stdin closes; 2 on a start-up problem."""
    import anyio

    from fak_core.gateway.bootstrap import BootstrapError, build_state, describe_policy
    from fak_core.gateway.mcp_server import run_stdio

    try:
        state = build_state(ns.policy, ns.tools)
    except BootstrapError as exc:
        print(f"fak mcp: {exc}", file=sys.stderr)
        return 2
    print(f"fak mcp: serving on stdio, policy {describe_policy(state, ns.policy)}", file=sys.stderr)
    anyio.run(run_stdio, state)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fak_core.gateway.mcp_cli`` (same as ``fak mcp``)."""
    parser = argparse.ArgumentParser(prog="fak")
    register(parser.add_subparsers(dest="command", required=True))
    ns = parser.parse_args(["mcp", *(sys.argv[1:] if argv is None else argv)])
    return int(ns.func(ns))


if __name__ == "__main__":
    raise SystemExit(main())
