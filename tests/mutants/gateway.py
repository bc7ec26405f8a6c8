"""Mutants of the gateway theorems (``theorems/gateway.md``): plausible wrong gateways.

Each one patches a class or module attribute of ``fak_core.gateway`` for the duration of a
witness re-run, so it breaks every surface that goes through the patched code (including
servers running in other threads of this process).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator, Mapping
from typing import Any
from unittest import mock

import mcp_types as types
import orjson
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from fak_core.calls import Result, Status, ToolCall
from fak_core.gateway import mcp_proxy, turn
from fak_core.gateway import wire as _wire
from fak_core.gateway.mcp_downstream import (
    Downstream,
    DownstreamError,
    DownstreamSpec,
    error_class,
)
from fak_core.gateway.mcp_proxy import McpProxy, ProxySession
from fak_core.gateway.state import GatewayState
from fak_core.gateway.turn import Adjudication, ProposedCall
from fak_core.provenance import BUILTIN_TRUSTED, SourceRegistry
from fak_core.taint import Taint
from fak_core.verdicts import Verdict, VerdictKind
from pytest_fak import mutant
from tests.mutants.sourcepatch import edited

__all__: list[str] = []

_state_module = importlib.import_module("fak_core.gateway.state")
_floor_module = importlib.import_module("fak_core.floor")
_proxy_module = importlib.import_module("fak_core.gateway.mcp_proxy")
_real_render_verdict = _state_module.render_verdict
_real_adjudicate = GatewayState.adjudicate
_real_adjudicate_async = GatewayState.adjudicate_async
_real_syscall = GatewayState.syscall
_real_adjudicate_one = turn.adjudicate_one
_real_call_tool = McpProxy.call_tool


# ------------------------------------------------------------------------------- D10.1
@mutant("D10.1/wire-decides")
def wire_decides() -> Any:
    """The seam answers ALLOW on its own for every tool the policy lists by name, without
    asking the kernel (so taint, schemas, witnesses and adjudicators are skipped)."""

    def adjudicate(self: GatewayState, call: ToolCall) -> dict[str, Any]:
        if call.tool in self.kernel.policy.allow:
            return {"verdict": {"kind": "ALLOW", "by": "gateway"}, "trace_id": call.trace_id}
        return _real_adjudicate(self, call)

    async def adjudicate_async(self: GatewayState, call: ToolCall) -> dict[str, Any]:
        if call.tool in self.kernel.policy.allow:
            return {"verdict": {"kind": "ALLOW", "by": "gateway"}, "trace_id": call.trace_id}
        return await _real_adjudicate_async(self, call)

    @contextlib.contextmanager
    def both() -> Iterator[None]:
        with (
            mock.patch.object(GatewayState, "adjudicate", adjudicate),
            mock.patch.object(GatewayState, "adjudicate_async", adjudicate_async),
        ):
            yield

    return both()


@mutant("D10.1/render-drift")
def render_drift() -> Any:
    """The gateway's projection takes a DENY's disposition from the kind alone (every DENY
    TERMINAL) instead of from its reason: it renames, and so changes what a client does."""

    def render_verdict(verdict: Verdict, *args: Any, **kwargs: Any) -> dict[str, Any]:
        out: dict[str, Any] = _real_render_verdict(verdict, *args, **kwargs)
        if verdict.kind == VerdictKind.DENY:
            out["disposition"] = "TERMINAL"
        return out

    return mock.patch.object(_state_module, "render_verdict", render_verdict)


@mutant("D10.1/principal-trim-differs")
def principal_trim_differs() -> Any:
    """The bug fixed: ``X-Fak-Principal`` is trimmed with ``str.strip()`` (U+001C..U+001F and
    U+0085 too) and the body's principal not at all, so one text is two principals."""
    return edited(
        _wire.parse_call,
        (
            '(_opt_str(doc, "principal") or "").strip(BLANK)',
            '_opt_str(doc, "principal") or ""',
        ),
        (
            "and header_principal.strip(BLANK):\n        principal = header_principal.strip(BLANK)",
            "and header_principal.strip():\n        principal = header_principal.strip()",
        ),
    )


# ------------------------------------------------------------------------------- D10.2
@mutant("D10.2/default-keeps")
def default_keeps() -> Any:
    """The default branch of ``adjudicate_one`` keeps the call (fail open): everything the
    kernel did not refuse as unbuildable survives, arguments unrepaired."""

    async def adjudicate_one(
        state: GatewayState, proposed: ProposedCall, trace_id: str, choice: int = 0
    ) -> Adjudication:
        adj = await _real_adjudicate_one(state, proposed, trace_id, choice)
        if adj.admitted or not isinstance(proposed.name, str):
            return adj
        args = proposed.arguments
        text = args if isinstance(args, str) else orjson.dumps(args or {}).decode()
        return Adjudication(proposed, adj.verdict, True, text, adj.digest, choice=choice)

    return mock.patch.object(turn, "adjudicate_one", adjudicate_one)


@mutant("D10.2/results-not-admitted")
def results_not_admitted() -> Any:
    """The proxies skip admitting inbound tool results: taint never rises on a turn."""

    def admit_results(*args: Any, **kwargs: Any) -> None:
        return None

    # both proxies admit through turn.admit_inbound, which calls turn.admit_results
    return mock.patch.object(turn, "admit_results", admit_results)


# ------------------------------------------------------------------------------- D10.3
@mutant("D10.3/deny-raises")
def deny_raises() -> Any:
    """The syscall seam raises on a refusal instead of returning it (a 500, not a value)."""

    def syscall(self: GatewayState, call: ToolCall) -> dict[str, Any]:
        out = _real_syscall(self, call)
        if out["verdict"]["kind"] not in ("ALLOW", "TRANSFORM"):
            raise PermissionError(f"call refused: {out['verdict']}")
        return out

    return mock.patch.object(GatewayState, "syscall", syscall)


@mutant("D10.3/bad-request-500")
def bad_request_500() -> Any:
    """The native routes answer a request they cannot turn into a call with a 500 (a
    server fault) instead of a 400 naming the field to fix."""
    native = importlib.import_module("fak_core.gateway.native")
    real = native.error_response

    def error_response(status: int, message: str, **kwargs: Any) -> Any:
        return real(500 if status == 400 else status, message, **kwargs)

    return mock.patch.object(native, "error_response", error_response)


# --------------------------------------------------------------------------------- D11
def _refused(result: types.CallToolResult) -> bool:
    if not result.is_error or len(result.content) != 1:
        return False
    block = result.content[0]
    return isinstance(block, types.TextContent) and '"refused"' in block.text


@mutant("D11/forward-refused")
def forward_refused() -> Any:
    """The proxy sends the call downstream even when the kernel refused it (it still shows
    the client the refusal, so only the server's side effects tell)."""

    async def call_tool(
        self: McpProxy,
        session: ProxySession,
        name: str,
        arguments: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        result = await _real_call_tool(self, session, name, arguments, meta)
        if _refused(result):
            route = await self._route(name)
            if route is not None:
                await route.server.call_tool(route.downstream_name, dict(arguments or {}))
        return result

    return mock.patch.object(McpProxy, "call_tool", call_tool)


@mutant("D11/results-unadmitted")
def results_unadmitted() -> Any:
    """Downstream answers are passed back without the kernel's admission: no taint, no
    quarantine of injected text."""

    def admit_text(self: McpProxy, call: ToolCall, text: str) -> dict[str, Any]:
        return {
            "verdict": self.state.render(Verdict.allow("mutant")),
            "result": {"status": "OK", "content": text, "meta": {}},
            "trace_id": call.trace_id,
        }

    return mock.patch.object(McpProxy, "_admit_text", admit_text)


@mutant("D11/url-scheme-case-refused")
def url_scheme_case_refused() -> Any:
    """A downstream URL's scheme is matched in lower case only: ``HTTP://h/mcp``, the same
    URL by RFC 3986, is refused (the bug fixed)."""
    return edited(
        DownstreamSpec.__post_init__,
        ('if sep and head.isascii() and head.lower() in ("http", "https"):', "if False:"),
    )


@mutant("D11/decide-before-route")
def decide_before_route() -> Any:
    """The regression: a tool the proxy has not listed yet is decided before routing, so
    its schema (registered by listing) is unknown and rung 1 is skipped."""

    async def call_tool(
        self: McpProxy,
        session: ProxySession,
        name: str,
        arguments: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        if name not in self._tools:
            call = self.state.build_call(
                name, dict(arguments) if arguments is not None else None, session.trace_id
            )
            call, verdict, runnable = self.kernel.authorize(call)
            route = await self._route(name) if runnable else None
            args = self.kernel.view(call).args() if route is not None else None
            if route is not None and args is not None:
                answer = await route.server.call_tool(route.downstream_name, args)
                return self._admit(call, verdict, answer)
        return await _real_call_tool(self, session, name, arguments, meta)

    return mock.patch.object(McpProxy, "call_tool", call_tool)


# ------------------------------------------------------------------------------- D11.1
@mutant("D11.1/errors-verbatim")
def errors_verbatim() -> Any:
    """The original bug: a downstream JSON-RPC error answer reaches the client verbatim
    (message and data), unscreened and unadmitted, so the session's taint never rises."""

    def admit_error(
        self: McpProxy,
        call: ToolCall,
        verdict: Verdict,
        exc: DownstreamError,
        error: types.ErrorData,
    ) -> types.CallToolResult:
        payload = {
            "error": "downstream error answer",
            "server": exc.server,
            "tool": call.tool,
            "code": error.code,
            "class": error_class(error.code),
            "message": error.message,
            "data": error.data,
            "trace_id": call.trace_id,
        }
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=orjson.dumps(payload).decode())],
            is_error=True,
            _meta={"fak": payload},
        )

    return mock.patch.object(McpProxy, "_admit_error", admit_error)


@mutant("D11.1/server-error-is-crash")
def server_error_is_crash() -> Any:
    """The original bug: an error answer with code -32000 (the code the SDK also uses for
    a closed connection) is read as a crash: the connection is dropped and the client is
    told the server crashed."""
    real = Downstream._error_answer

    async def error_answer(
        self: Downstream, link: Any, method: str, exc: MCPError
    ) -> DownstreamError:
        if exc.code == CONNECTION_CLOSED:
            await self.drop()
            return DownstreamError(self.name, "crashed", f"the connection closed during {method}")
        return await real(self, link, method, exc)

    return mock.patch.object(Downstream, "_error_answer", error_answer)


@mutant("D11.1/metadata-unscreened")
def metadata_unscreened() -> Any:
    """The original bug: tool names, descriptions and schemas from a downstream server are
    listed to the client as they come (tool poisoning)."""

    def screen_tool(self: McpProxy, name: str, tool: types.Tool) -> str | None:
        return None

    return mock.patch.object(McpProxy, "screen_tool", screen_tool)


@mutant("D11.1/split-secret-passes")
def split_secret_passes() -> Any:
    """The original bug: the strings of an error answer, a tool's metadata or a result are
    screened only joined one a line, so a secret split across two of them passes in halves."""

    def lines_only(parts: Any, has_secret: Any = None, orders: Any = ()) -> str:
        return "\n".join(parts)

    return mock.patch.object(mcp_proxy, "joined_text", lines_only)


# ------------------------------------------------------------------------------- D11.2
@mutant("D11.2/trust-builtins")
def trust_builtins() -> Any:
    """The original bug: with --trust-sources every result is claimed TRUSTED and the
    kernel's source registry decides, and that registry also trusts built-in names
    (read_file, cat, Read, ...) the policy never named. Issue 30 removed the built-ins
    from the registry too, so both halves are put back: the proxy defers to the registry,
    and the registry starts with the built-in names trusted (as it once did)."""

    def admit_text(self: McpProxy, call: ToolCall, text: str) -> dict[str, Any]:
        if not self.trust_sources:
            return self.state.admit(call, text)
        admitted, v = self.kernel.admit(call, Result(Status.OK, text, taint=Taint.TRUSTED))
        return {
            "verdict": self.state.render(v, admitted.meta),
            "result": {
                "status": admitted.status.value,
                "content": admitted.payload,
                "meta": dict(admitted.meta),
            },
            "trace_id": call.trace_id,
        }

    real_init = SourceRegistry.__init__

    def init(self: SourceRegistry, sources: Any = None) -> None:
        real_init(self, {**dict.fromkeys(BUILTIN_TRUSTED, "trusted_local"), **(sources or {})})

    @contextlib.contextmanager
    def both() -> Iterator[None]:
        with (
            mock.patch.object(McpProxy, "_admit_text", admit_text),
            mock.patch.object(SourceRegistry, "__init__", init),
        ):
            yield

    return both()


@mutant("D11.2/prefix-on-aggregated-name")
def prefix_on_aggregated_name() -> Any:
    """The original bug: allow_prefix is matched against the whole '<server>__<tool>'
    name, so a server called 'calculator' satisfies the prefix 'calc' for every tool."""

    def prefix_allows(prefixes: tuple[str, ...], tool: str, separator: str = "") -> bool:
        return bool(prefixes) and tool.startswith(prefixes)

    @contextlib.contextmanager
    def both() -> Iterator[None]:
        with (
            mock.patch.object(_floor_module, "prefix_allows", prefix_allows),
            mock.patch.object(_proxy_module, "prefix_allows", prefix_allows),
        ):
            yield

    return both()


# ------------------------------------------------------------------------------- D11.3
@mutant("D11.3/metadata-trusted")
def metadata_trusted() -> Any:
    """The original bug: listed metadata that passes the screen is trusted text: no
    session that lists it (or calls its tool) has its taint raised, pinned or not."""

    def mark_seen(self: McpProxy, session: ProxySession, routed: Any) -> set[str]:
        return set()

    return mock.patch.object(McpProxy, "mark_seen", mark_seen)


@mutant("D11.3/pin-ignores-change")
def pin_ignores_change() -> Any:
    """A pin that vouches for a server rather than for each tool's metadata: on a pinned
    server every tool passes as pinned, changed after the pin or never pinned."""
    real = _proxy_module.pin_status

    def pin_status(pins: Any, server: str, tool: types.Tool) -> tuple[str, str]:
        status, digest = real(pins, server, tool)
        return ("pinned" if status in ("changed", "unknown") else status), digest

    return mock.patch.object(_proxy_module, "pin_status", pin_status)


# ---------------------------------------------------------------- D10.7 JSON depth
_jsondepth = importlib.import_module("fak_core.jsondepth")
_DUMPS_USERS = (
    "fak_core.kernel",
    "fak_core.gateway.state",
    "fak_core.gateway.native",
    "fak_core.gateway.proxy_io",
    "fak_core.gateway.turn",
    "fak_core.gateway.app",
    "fak_core.gateway.carriers",
)


def _no_check(raw: Any, limit: int = 0, what: str = "") -> None:
    return None


@contextlib.contextmanager
def _bare_writers() -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for name in _DUMPS_USERS:
            mod = importlib.import_module(name)
            stack.enter_context(mock.patch.object(mod, "dumps", orjson.dumps))
        stack.enter_context(mock.patch.object(_jsondepth, "dumps", orjson.dumps))
        yield


@contextlib.contextmanager
def _no_read_limit() -> Iterator[None]:
    server = importlib.import_module("fak_core.gateway.mcp_server")
    with (
        mock.patch.object(_jsondepth, "check_depth", _no_check),
        mock.patch.object(server, "check_depth", _no_check),
    ):
        yield


@mutant("D10.7/writer-without-depth-guard")
def writer_without_depth_guard() -> Any:
    """Readers take all orjson reads (1024 levels), writers are bare orjson (254)."""

    @contextlib.contextmanager
    def both() -> Iterator[None]:
        with _no_read_limit(), _bare_writers():
            yield

    return both()


# ------------------------------------------------------------------------------- D12
@mutant("D12/sequential-ids")
def sequential_ids() -> Any:
    """The gateway mints trace ids from a counter (``gw-1``, ``gw-2``, ...), as it once did:
    a client guesses the next one."""
    import itertools

    counter = itertools.count(1)

    def mint() -> str:
        return f"gw-{next(counter)}"

    return mock.patch.object(_state_module, "new_trace_id", mint)


@mutant("D12/trace-length-after-strip")
def trace_length_after_strip() -> Any:
    """A body trace id's length is checked once its blanks are stripped (the old bug): a
    129-character id with a blank at an end passes for 128."""
    return edited(
        _wire.parse_trace_id,
        ("if trace is not None and (problem := trace_id_problem(trace)) is not None:", "if False:"),
    )


@mutant("D12/header-trace-python-strip")
def header_trace_python_strip() -> Any:
    """The trace middleware strips ``X-Trace-Id`` with ``str.strip()`` (the old bug), which
    also takes U+001C to U+001F and U+0085: such a header names another trace (or none,
    and one is minted) than the same text in the body does."""
    from fak_core.gateway.middleware import TraceMiddleware

    return edited(
        TraceMiddleware.__call__,
        ("if given and given.strip(BLANK):", "if given and given.strip():"),
        ("trace = given.strip(BLANK)", "trace = given.strip()"),
    )


@mutant("D12/reset-without-owner")
def reset_without_owner() -> Any:
    """Reading and resetting a trace check no ownership: anyone who names it may."""
    from fak_core.gateway.sessions import Sessions

    def permits(self: Sessions, trace: str, token: str | None, operator: str | None) -> str:
        return "owner"

    return mock.patch.object(Sessions, "permits", permits)


@contextlib.contextmanager
def _both_tables(*edits: tuple[str, str], redis: tuple[str, str] | None = None) -> Iterator[None]:
    """``edits`` applied to :meth:`Sessions.claim` and ``redis`` (if given) to
    :meth:`RedisSessions.claim`, together."""
    from fak_core.gateway.redis_sessions import RedisSessions
    from fak_core.gateway.sessions import Sessions

    with contextlib.ExitStack() as stack:
        stack.enter_context(edited(Sessions.claim, *edits))
        if redis is not None:
            stack.enter_context(edited(RedisSessions.claim, redis))
        yield


@mutant("D12/tokenless-widens")
def tokenless_widens() -> Any:
    """A request without a session token on an owned trace is accepted as that session
    (the old rule, "it can only raise the mark"): it records trusted context, a proxied
    turn's user words or an identifiers admit in the victim's session, widening it."""
    return _both_tables(
        (
            "if op or (given is not None and hmac.compare_digest(given, owner)):",
            "if op or given is None or hmac.compare_digest(given, owner):",
        ),
        redis=(
            "if op or (not minted and hmac.compare_digest(given.hex(), owner_hex)):",
            "if op or minted or hmac.compare_digest(given.hex(), owner_hex):",
        ),
    )


@mutant("D12/fixation")
def fixation() -> Any:
    """A token-less decision or admission on an owned trace goes on silently (the old
    README: "one with no token may still decide and admit on it"): a victim that lets the
    gateway mint its token, on an id an attacker used first, gets no token and no error
    and acts in the attacker's session, which reads and resets its taint."""
    from fak_core.gateway import native
    from fak_core.gateway.sessions import SESSION_HEADER, SessionError

    real = native.claim_session

    def claim_session(state: GatewayState, request: Any, trace: str) -> dict[str, str]:
        try:
            return real(state, request, trace)
        except SessionError:
            deciding = request.url.path in ("/v1/fak/adjudicate", "/v1/fak/syscall")
            if request.headers.get(SESSION_HEADER) is None and (
                deciding or request.url.path == "/v1/fak/admit"
            ):
                return {}
            raise

    return mock.patch.object(native, "claim_session", claim_session)


@mutant("D12/orphan-proceeds")
def orphan_proceeds() -> Any:
    """A trace whose owner the table dropped is let through without a token or the
    operator key (the old claim returned None and the request went on): anyone acts in a
    session whose owner was forgotten."""
    return _both_tables(("raise SessionError(403, orphaned(trace))", "return None"))


# ------------------------------------------------------------------------------- D13
@mutant("D13/host-check-only-on-mcp")
def host_check_only_on_mcp() -> Any:
    """Host, Origin and Content-Type are checked on ``/mcp`` only, as they once were."""
    from fak_core.gateway.middleware import HostOriginMiddleware

    real = HostOriginMiddleware.refusal

    def refusal(self: HostOriginMiddleware, scope: Any) -> Any:
        return real(self, scope) if scope.get("path") == "/mcp" else None

    return mock.patch.object(HostOriginMiddleware, "refusal", refusal)


@mutant("D13/credential-forwarded")
def credential_forwarded() -> Any:
    """With no pinned key, the client's Authorization and X-Api-Key go upstream, as they
    once did (with --api-key-env, that is the client's gateway key)."""
    from fak_core.gateway.upstream import Upstream

    real = Upstream.headers

    def headers(self: Upstream, wire: Any, client_headers: Any) -> dict[str, str]:
        out = real(self, wire, client_headers)
        if not self.config.api_key:
            for name in ("authorization", "x-api-key"):
                if client_headers.get(name):
                    out[name] = client_headers[name]
        return out

    return mock.patch.object(Upstream, "headers", headers)


@mutant("D13/empty-allowed-host")
def empty_allowed_host() -> Any:
    """An ``--allowed-hosts`` entry that is only a port (``:8080``) allows the empty host
    name, as it once did: an empty ``Host`` and a host-less ``Origin`` are answered."""
    middleware = importlib.import_module("fak_core.gateway.middleware")
    app = importlib.import_module("fak_core.gateway.app")
    real = middleware.allowed_hosts_for

    def allowed_hosts_for(bind: Any, given: Any = ()) -> Any:
        if given:
            return tuple(middleware._host_name(h) for h in given if h.strip())
        return real(bind, given)

    return mock.patch.object(app, "allowed_hosts_for", allowed_hosts_for)


@mutant("D10.7/id-prefix-of-a-number")
def id_prefix_of_a_number() -> Any:
    """A frame too deep to parse whole is answered with the id its leading digits spell
    (``1`` for ``"id": 1.5``), as it once was: the error goes to another request."""
    import re

    mcp_server = importlib.import_module("fak_core.gateway.mcp_server")
    loose = re.compile(
        rb'\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")'
    )
    return mock.patch.object(mcp_server, "_LEADING_ID", loose)


@mutant("D10.7/no-read-limit")
def no_read_limit() -> Any:
    """Bodies are not checked against the gateway's depth limit."""
    return _no_read_limit()


@mutant("D10.7/bare-orjson-writer")
def bare_orjson_writer() -> Any:
    """The response writers are bare orjson (the read limit stays)."""
    return _bare_writers()


@mutant("D12/owner-table-undercounts")
def owner_table_undercounts() -> Any:
    """The owner table's byte count before it was measured: 128 bytes an owner beyond its
    trace id, about half of what an entry holds (the bug)."""
    import fak_core.gateway.sessions as sessions_mod

    return mock.patch.object(sessions_mod, "ENTRY_OVERHEAD", 128)
