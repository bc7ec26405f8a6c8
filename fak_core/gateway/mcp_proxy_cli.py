"""``fak mcp-proxy``: run the MCP proxy on stdio in front of one or more MCP servers.

    fak mcp-proxy --policy POLICY -- SERVER_COMMAND [ARG ...]
    fak mcp-proxy --policy POLICY --url http://host:port/mcp
    fak mcp-proxy --policy POLICY --servers servers.json
    fak mcp-proxy --print-pins --servers servers.json > pins.json   # review, then:
    fak mcp-proxy --policy POLICY --servers servers.json --pins pins.json

Registered through the ``fak.commands`` entry point. stdout carries MCP only; every
message of the proxy's own goes to stderr. A server given after ``--`` inherits the
proxy's environment; servers from a file get the SDK's safe default environment plus
their ``env`` table. A crashed server is restarted on the next call (the call that met the
crash is reported, never replayed); a hung one is reported after ``--call-timeout``.

A downstream server's tool metadata is untrusted text: listing it taints the session
unless ``--pins`` vouches for it (:mod:`fak_core.gateway.mcp_pins`). ``--print-pins``
lists the servers once and prints the pins of what they list now, in the file's format.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "mcp-proxy",
        help="adjudicate every MCP tool call between a client and its MCP servers",
        description=(
            "An MCP server on stdio that fronts MCP servers: every tools/call is decided by "
            "the kernel before it is forwarded, and every result is admitted before the "
            "client sees it."
        ),
    )
    p.add_argument("--policy", help="policy file (.json or .toml); default: the built-in policy")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--servers", metavar="FILE", help="servers file (JSON or TOML) to aggregate")
    src.add_argument("--url", help="one downstream server over streamable HTTP")
    p.add_argument(
        "--name", default="server", help="name of the single downstream server (default: server)"
    )
    p.add_argument(
        "--prefix",
        action="store_true",
        help="prefix tool names with the server name even for a single server",
    )
    p.add_argument(
        "--call-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="bound on each downstream request (default: 30)",
    )
    p.add_argument(
        "--trust-sources",
        action="store_true",
        help="trust the results of exactly the tools the policy's 'sources' table names "
        "trusted_local (by their exposed name), nothing built in; error answers are never "
        "trusted (default: every result untrusted)",
    )
    p.add_argument(
        "--journal",
        metavar="FILE",
        help="append every decision and admission to this decision journal (SQLite)",
    )
    p.add_argument(
        "--pins",
        metavar="FILE",
        help="pins file (JSON or TOML): the tool metadata the operator trusts, a SHA-256 per "
        "tool per server; a pinned server lists only its pinned, unchanged tools (default: "
        "no pins, so listed metadata is untrusted and taints the session that lists it)",
    )
    p.add_argument(
        "--print-pins",
        action="store_true",
        help="list the downstream servers, print the pins of what they list now (the "
        "--pins format) on stdout, and exit",
    )
    p.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help="the downstream server command, after --",
    )
    p.set_defaults(func=run)


def run(ns: argparse.Namespace) -> int:
    from fak_core.gateway.mcp_downstream import (
        DownstreamSpec,
        ServerConfigError,
        load_servers,
    )
    from fak_core.policy import PolicyError, default_policy, load_policy

    command = list(ns.command or [])
    if command and command[0] == "--":
        command = command[1:]
    try:
        policy = load_policy(ns.policy) if ns.policy else default_policy()
    except PolicyError as exc:
        print(f"fak mcp-proxy: {exc}", file=sys.stderr)
        return 2
    if ns.call_timeout <= 0:
        print("fak mcp-proxy: --call-timeout must be positive", file=sys.stderr)
        return 2
    given = sum(bool(x) for x in (ns.servers, ns.url, command))
    if given != 1:
        print(
            "fak mcp-proxy: name the downstream server(s): '-- COMMAND ...', --url URL, "
            "or --servers FILE (exactly one)",
            file=sys.stderr,
        )
        return 2
    try:
        if ns.servers:
            specs = load_servers(ns.servers)
        elif ns.url:
            specs = [DownstreamSpec(ns.name, url=ns.url)]
        else:
            # the command is "the server behind this proxy": it gets the proxy's environment
            # (a servers file passes only what each entry's 'env' names, plus PATH, HOME...)
            specs = [
                DownstreamSpec(
                    ns.name, command=command[0], args=tuple(command[1:]), env=dict(os.environ)
                )
            ]
    except ServerConfigError as exc:
        print(f"fak mcp-proxy: {exc}", file=sys.stderr)
        return 2
    pins = None
    try:
        if ns.pins:
            from fak_core.gateway.mcp_pins import load_pins

            pins = load_pins(ns.pins)
    except ServerConfigError as exc:
        print(f"fak mcp-proxy: --pins: {exc}", file=sys.stderr)
        return 2

    import anyio

    from fak_core.gateway.bootstrap import BootstrapError, enable_env_approvals
    from fak_core.gateway.mcp_proxy import McpProxy, serve_stdio
    from fak_core.kernel import Kernel

    kernel = Kernel(policy)
    if ns.print_pins:
        return _print_pins(McpProxy(kernel, specs, call_timeout=ns.call_timeout))
    if not ns.policy:
        print("fak mcp-proxy: no --policy given, using the built-in policy", file=sys.stderr)
    try:
        enable_env_approvals(kernel)
    except BootstrapError as exc:
        print(f"fak mcp-proxy: {exc}", file=sys.stderr)
        return 2
    journal = None
    if ns.journal:
        from fak_core.journal import Journal, JournalError

        try:
            journal = Journal(ns.journal)
        except JournalError as exc:
            print(f"fak mcp-proxy: --journal: {exc}", file=sys.stderr)
            return 2
        journal.attach(kernel)
    try:
        proxy = McpProxy(
            kernel,
            specs,
            decision_journal=journal,
            call_timeout=ns.call_timeout,
            prefix=True if ns.prefix else None,
            trust_sources=ns.trust_sources,
            pins=pins,
        )
    except ValueError as exc:
        print(f"fak mcp-proxy: {exc}", file=sys.stderr)
        if journal is not None:
            journal.close()
        return 2
    try:
        anyio.run(serve_stdio, proxy)
    except KeyboardInterrupt:
        return 130
    finally:
        if journal is not None:
            journal.close()
    return 0


def _print_pins(proxy: Any) -> int:
    """List every server once and print the pins of what it lists, as a pins file."""
    import json

    import anyio

    from fak_core.gateway.mcp_downstream import DownstreamError

    async def main() -> dict[str, dict[str, str]]:
        async with proxy:
            pins: dict[str, dict[str, str]] = await proxy.current_pins()
            return pins

    try:
        pins = anyio.run(main)
    except DownstreamError as exc:
        print(f"fak mcp-proxy: --print-pins: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"pins": pins}, indent=2, sort_keys=True))
    return 0
