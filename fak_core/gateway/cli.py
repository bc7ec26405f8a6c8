"""``fak serve``: run the gateway (fak-native API, MCP at /mcp, and the proxies) on uvicorn.

Registered through the ``fak.commands`` entry point. It binds the socket itself (port 0
picks a free port) and prints one line with the real address and the policy's digest
before serving, so scripts and tests can read where it listens.
"""

from __future__ import annotations

import argparse
import importlib
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute

from fak_core.gateway.bootstrap import (
    BootstrapError,
    build_state,
    describe_policy,
    manifest_policy,
)
from fak_core.gateway.replicas import (
    attach_shared,
    journal_path_for,
    open_shared,
    run_workers,
    shared_kernel_options,
)
from fak_core.gateway.state import GatewayState
from fak_core.journal import Journal, JournalError

__all__ = ["bind_socket", "load_proxy_routes", "open_journal", "register", "serve"]


def register(subparsers: Any) -> None:
    """Add ``serve`` to the ``fak`` command line."""
    p = subparsers.add_parser("serve", help="run the gateway over HTTP (and MCP at /mcp)")
    p.add_argument("--policy", metavar="FILE", help="policy file; default: the built-in one")
    p.add_argument(
        "--manifest", metavar="FILE", help="run one node of a frozen flow manifest (with --node)"
    )
    p.add_argument("--node", metavar="ID", help="the manifest node whose capability lock to run")
    p.add_argument("--tools", metavar="MODULE", help="module or .py file exposing TOOLS")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (0 picks a free one)")
    p.add_argument("--upstream", metavar="URL", help="model API to proxy; default: offline")
    p.add_argument(
        "--upstream-key-env", metavar="NAME", help="environment variable holding the upstream key"
    )
    p.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="require 'Authorization: Bearer <key>' with the key read from this variable",
    )
    p.add_argument(
        "--operator-key-env",
        metavar="NAME",
        help="the operator key (sent as X-Fak-Operator-Key) read from this variable: it may "
        "read and reset any session",
    )
    p.add_argument(
        "--allowed-hosts",
        metavar="A,B",
        default="",
        help="host names every route answers for (Host and Origin); default: the loopback "
        "names when bound to loopback, no check otherwise",
    )
    p.add_argument(
        "--forward-header",
        metavar="NAME",
        action="append",
        default=[],
        help="relay this client header to the upstream (repeatable), e.g. Authorization "
        "when clients bring their own provider key; by default no client credential is sent",
    )
    p.add_argument(
        "--max-tool-results",
        type=int,
        default=None,
        metavar="N",
        help="inbound tool results one proxied turn may carry; more is a 413 (default 256)",
    )
    p.add_argument("--max-body", type=int, default=None, help="request body cap in bytes")
    p.add_argument(
        "--text-links",
        choices=("police", "off"),
        default="police",
        help="the model's text in a tainted session: links to ungrounded destinations "
        "replaced by a marker (police, the default) or relayed as written (off)",
    )
    p.add_argument(
        "--max-tool-calls",
        type=int,
        default=None,
        metavar="N",
        help="tool calls adjudicated per proxied model turn; the rest are denied (default 64)",
    )
    p.add_argument(
        "--decide-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds one decision may take before it is a DENY (default 5)",
    )
    p.add_argument(
        "--tool-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds a syscall's tool may run before its result is an error (default: no limit)",
    )
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default warning)")
    p.add_argument(
        "--journal",
        metavar="FILE",
        help="record every decision and admission in this decision journal (SQLite, WAL); "
        "no response is sent before its decision is committed",
    )
    p.add_argument(
        "--journal-rotate-bytes",
        type=int,
        default=0,
        metavar="N",
        help="rotate the journal to FILE.1, FILE.2, ... past N bytes (0: never)",
    )
    p.add_argument(
        "--journal-durability",
        choices=("normal", "full"),
        default="normal",
        help="normal: a committed row survives the gateway being killed; "
        "full: it also survives a power cut (an fsync per batch)",
    )
    p.add_argument(
        "--state",
        metavar="URL",
        help="keep session state (taint, rate limits, held results, session owners) in this "
        "Redis, redis://HOST:PORT/DB, shared by every replica; default: in this process",
    )
    p.add_argument(
        "--state-ttl",
        type=float,
        default=None,
        metavar="S",
        help="with --state: seconds a session's owner and taint mark live in Redis after "
        "their last use (default 3600); a tainted session that expired is refused for good",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="serve with N processes on one socket (needs --state; default 1)",
    )
    p.add_argument(
        "--replica-id",
        metavar="ID",
        default=None,
        help="this process's name in every journal row (default with --state: the host "
        "name; each worker of --workers adds -w<i>); each replica writes its own chain",
    )
    p.set_defaults(func=serve)


def _env(flag: str, name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise BootstrapError(
            f"{flag} {name}: the environment variable {name} is not set; export it or drop {flag}"
        )
    return value


def load_proxy_routes(
    state: GatewayState,
    upstream: str | None,
    upstream_key: str | None,
    forward_headers: Sequence[str] = (),
) -> list[BaseRoute]:
    """The OpenAI and Anthropic proxy routes, if that module is installed."""
    try:
        proxies = importlib.import_module("fak_core.gateway.proxy_routes")
    except ModuleNotFoundError as exc:
        if exc.name != "fak_core.gateway.proxy_routes":
            raise  # the module exists but something it needs is missing: say so loudly
        if upstream:
            raise BootstrapError(
                "--upstream: this installation has no proxy routes (fak_core.gateway.proxy_routes)"
            ) from None
        return []
    config = None
    if upstream:
        upstream_mod = importlib.import_module("fak_core.gateway.upstream")
        try:
            config = upstream_mod.UpstreamConfig(
                base_url=upstream,
                api_key=upstream_key,
                forward_headers=tuple(h.strip().lower() for h in forward_headers if h.strip()),
            )
        except ValueError as exc:
            raise BootstrapError(f"--upstream {upstream}: {exc}") from exc
    return list(proxies.proxy_routes(state, config))


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: the kernel picks)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BootstrapError(f"--host {host}: cannot resolve it ({exc})") from exc
    family, socktype, proto, _, address = infos[0]
    sock = socket.socket(family, socktype, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise BootstrapError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if sock.family == socket.AF_INET6:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _limits(ns: argparse.Namespace) -> dict[str, Any]:
    """The state options from ``--max-tool-calls`` and ``--decide-timeout`` (checked)."""
    out: dict[str, Any] = {}
    if ns.max_tool_calls is not None:
        if ns.max_tool_calls < 1:
            raise BootstrapError("--max-tool-calls must be at least 1")
        out["max_tool_calls"] = ns.max_tool_calls
    if ns.max_tool_results is not None:
        if ns.max_tool_results < 1:
            raise BootstrapError("--max-tool-results must be at least 1")
        out["max_tool_results"] = ns.max_tool_results
    for flag, value in (
        ("--decide-timeout", ns.decide_timeout),
        ("--tool-timeout", ns.tool_timeout),
    ):
        if value is not None and not 0 < value < float("inf"):
            raise BootstrapError(f"{flag} must be a positive number of seconds")
    if ns.decide_timeout is not None:
        out["decide_timeout"] = ns.decide_timeout
    text_links = getattr(ns, "text_links", "police")
    if text_links != "police":
        out["text_links"] = text_links
    return out


def serve(ns: argparse.Namespace) -> int:
    """Run until interrupted; 2 on a start-up problem (with the message on stderr)."""
    workers = getattr(ns, "workers", 1)
    state_url = getattr(ns, "state", None)
    replica = getattr(ns, "replica_id", None)
    if replica is None:
        replica = socket.gethostname() if state_url else ""
    if workers < 1 or (workers > 1 and not state_url):
        why = (
            "--workers must be at least 1"
            if workers < 1
            else f"--workers {workers} needs --state redis://HOST:PORT/DB: each worker would "
            "keep its own taint ledger, so a session tainted on one worker would be clean on "
            "the next (a fail-open path); pass --state, or run one worker"
        )
        print(f"fak serve: {why}", file=sys.stderr)
        return 2
    if workers == 1:
        return _serve_one(ns, None, replica)
    try:  # check everything once before forking, so a bad setting fails the start
        open_shared(str(state_url), ttl=getattr(ns, "state_ttl", None)).close()
        if ns.manifest:  # each worker re-validates it; the parent names what they run
            _, digest = manifest_policy(ns.manifest, ns.node)
            described = f"manifest {ns.manifest} node {ns.node} ({digest})"
        else:
            described = describe_policy(build_state(ns.policy, None), ns.policy)
        sock = bind_socket(ns.host, ns.port)
    except BootstrapError as exc:
        print(f"fak serve: {exc}", file=sys.stderr)
        return 2
    print(f"fak serve: listening on {_url(sock)} policy {described} workers {workers}", flush=True)
    return run_workers(workers, sock, lambda i: _serve_one(ns, sock, f"{replica}-w{i}"))


def _serve_one(ns: argparse.Namespace, bound: socket.socket | None, replica: str) -> int:
    """One gateway process (a worker when ``bound`` is the parent's socket)."""
    import uvicorn

    from fak_core.gateway.app import create_app

    state: GatewayState | None = None
    state_url = getattr(ns, "state", None)
    try:
        api_key = _env("--api-key-env", ns.api_key_env) if ns.api_key_env else None
        upstream_key = (
            _env("--upstream-key-env", ns.upstream_key_env) if ns.upstream_key_env else None
        )
        options: dict[str, Any] = {}
        if ns.max_body is not None:
            if ns.max_body <= 0:
                raise BootstrapError("--max-body must be a positive number of bytes")
            options["max_body"] = ns.max_body
        options.update(_limits(ns))
        described: str | None = None
        if ns.manifest:
            if ns.policy:
                raise BootstrapError("--manifest and --policy exclude each other: pick one")
            policy, manifest_digest = manifest_policy(ns.manifest, ns.node)
            options["policy"] = policy
            described = f"manifest {ns.manifest} node {ns.node} ({manifest_digest})"
        elif ns.node:
            raise BootstrapError("--node goes with --manifest FILE")
        ttl = getattr(ns, "state_ttl", None)
        shared = open_shared(state_url, ttl=ttl) if state_url else None
        kernel_options = shared_kernel_options(shared) if shared is not None else None
        state = build_state(ns.policy, ns.tools, kernel_options=kernel_options, **options)
        if shared is not None:
            attach_shared(state, shared)
        if ns.journal:
            state.journal = open_journal(ns, state, replica)
        if ns.tool_timeout is not None:
            state.kernel.tool_timeout = ns.tool_timeout
        operator_key = (
            _env("--operator-key-env", ns.operator_key_env) if ns.operator_key_env else None
        )
        if ns.forward_header and not ns.upstream:
            raise BootstrapError("--forward-header goes with --upstream URL")
        extra = load_proxy_routes(state, ns.upstream, upstream_key, ns.forward_header)
        health = {"planner": "proxy" if ns.upstream else ("scripted" if extra else "none")}
        app = create_app(
            state,
            extra_routes=extra,
            api_key=api_key,
            policy_path=ns.policy,
            health=health,
            host=ns.host,
            allowed_hosts=[h for h in ns.allowed_hosts.split(",") if h.strip()],
            operator_key=operator_key,
        )
        sock = bound if bound is not None else bind_socket(ns.host, ns.port)
    except BootstrapError as exc:
        if state is not None and state.journal is not None:
            state.journal.close()
        print(f"fak serve: {exc}", file=sys.stderr)
        return 2
    policy_text = describe_policy(state, described or ns.policy)
    if bound is None:
        print(f"fak serve: listening on {_url(sock)} policy {policy_text}", flush=True)
    # proxy_headers off: nothing here reads the client address, and a security gateway
    # should not rewrite it from X-Forwarded-For because a local process said so.
    config = uvicorn.Config(
        app, log_level=ns.log_level, lifespan="on", access_log=False, proxy_headers=False
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0


def open_journal(ns: argparse.Namespace, state: GatewayState, replica: str = "") -> Journal:
    """Open ``--journal`` and attach it to the state's kernel (recording, fail-closed gate);
    a replica writes its own chain (under ``--workers``, its own file)."""
    if ns.journal_rotate_bytes < 0:
        raise BootstrapError("--journal-rotate-bytes must be 0 (never) or a positive size")
    path = journal_path_for(ns.journal, replica, getattr(ns, "workers", 1))
    try:
        journal = Journal(
            path,
            durability=ns.journal_durability,
            rotate_bytes=ns.journal_rotate_bytes,
            replica=replica,
        )
    except JournalError as exc:
        raise BootstrapError(f"--journal: {exc}") from exc
    journal.attach(state.kernel)
    return journal


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fak_core.gateway.cli`` (same as ``fak serve``)."""
    parser = argparse.ArgumentParser(prog="fak")
    register(parser.add_subparsers(dest="command", required=True))
    ns = parser.parse_args(["serve", *(sys.argv[1:] if argv is None else argv)])
    return int(ns.func(ns))


if __name__ == "__main__":
    raise SystemExit(main())
