"""The MCP surface: ``fak_adjudicate``, ``fak_syscall`` and ``fak_admit`` as MCP tools.

Built on the official ``mcp`` SDK's low-level :class:`mcp.server.Server`; served over stdio
(``fak mcp``) and streamable HTTP (mounted at ``/mcp`` by :func:`create_app`). Each tool
returns the same JSON object the matching HTTP route returns, as text content and as
structured content. A deny is a normal tool result. A request the gateway cannot turn into
a call (blank tool, wrong field type) is a tool result with ``isError`` true and the
message, as the MCP spec asks for errors a model can correct; an unknown MCP tool name is
the protocol's invalid-params error (-32602).

Sessions are owned as on the HTTP routes (:mod:`fak_core.gateway.sessions`): a tool call
that binds a trace gets its token in the result's ``_meta`` under ``fak/session``; a later
call on that trace presents it in the request's ``_meta`` (``fak/session``), in the
``X-Fak-Session`` header of ``/mcp``, or not at all on the same connection (a stdio
process, a streamable-HTTP session), which remembers the token it got first. Without it
(or the operator key, ``X-Fak-Operator-Key`` on ``/mcp``), a call on someone else's trace
is an error result saying what to send.
"""

from __future__ import annotations

import json
import re
import sys
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable
from typing import Any, BinaryIO

import anyio
import mcp_types as types
import orjson
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from pydantic import ValidationError
from starlette.requests import Request

import fak_core
from fak_core.gateway.sessions import OPERATOR_HEADER, SESSION_HEADER, SessionError
from fak_core.gateway.state import BLANK, GatewayState, WireError
from fak_core.gateway.wire import parse_admit, parse_call
from fak_core.jsondepth import MAX_JSON_DEPTH, JsonTooDeep, check_depth
from fak_core.statedown import StateUnavailable

__all__ = [
    "ADMIT_SCHEMA",
    "CALL_SCHEMA",
    "ConnectionTokens",
    "MAX_FRAME",
    "SESSION_META",
    "build_mcp_server",
    "depth_error",
    "run_stdio",
    "stdio_mcp_server",
]

SERVER_NAME = "fak-gateway"
MAX_FRAME = 4 << 20

_COMMON: dict[str, Any] = {
    "tool": {"type": "string", "minLength": 1, "description": "the tool the agent wants to call"},
    "trace_id": {
        "type": "string",
        "description": "session id; minted and returned if absent. A trace another client "
        "opened is refused without its session token (_meta fak/session)",
    },
    "witness": {"type": "string", "description": "evidence offered for a REQUIRE_WITNESS gate"},
}

CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **_COMMON,
        "arguments": {
            "type": ["object", "string"],
            "description": "the call's arguments: a JSON object, or its JSON text",
        },
        "read_only": {"type": "boolean", "description": "advisory hint; grants nothing"},
    },
    "required": ["tool"],
}

ADMIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **_COMMON,
        "result": {
            "type": ["object", "string"],
            "description": "the result the client ran the tool for: a JSON object or text",
        },
    },
    "required": ["tool"],
}

_TOOLS = (
    types.Tool(
        name="fak_adjudicate",
        description="Decide a proposed tool call (nothing runs). Returns the verdict; a "
        "DENY is a normal result. Same body as POST /v1/fak/adjudicate.",
        input_schema=CALL_SCHEMA,
    ),
    types.Tool(
        name="fak_syscall",
        description="Decide a tool call and, if allowed, run the registered tool and admit "
        "its result. Same body as POST /v1/fak/syscall.",
        input_schema=CALL_SCHEMA,
    ),
    types.Tool(
        name="fak_admit",
        description="Admit a result the client produced itself (it is tainted; it may be "
        "quarantined). Same body as POST /v1/fak/admit.",
        input_schema=ADMIT_SCHEMA,
    ),
)


def _header_trace(ctx: ServerRequestContext[Any, Any]) -> str | None:
    request = ctx.request
    if isinstance(request, Request):
        return request.headers.get("x-trace-id")
    return None


#: The key of a tool call's ``_meta`` (request and result) that carries the session token.
SESSION_META = "fak/session"
#: Connections whose first token is remembered (oldest forgotten first: its client must
#: then present the token itself, else its calls are refused; forgetting fails closed).
MAX_CONNECTIONS = 4096
_MCP_SESSION_HEADER = "mcp-session-id"
_MCP_HINT = (
    f" (over MCP the token travels in the request's _meta under {SESSION_META!r}, as it "
    "came back in the _meta of the result that bound the trace)"
)


class ConnectionTokens:
    """The session token each MCP connection got on its first call that bound a trace, so
    that later calls on the same connection present it by themselves: the stdio process
    of ``fak mcp`` (``stdio``: one connection, whoever launched it) and each
    streamable-HTTP session (its ``Mcp-Session-Id``, minted at random by the SDK, which
    refuses an id it did not mint). A request over HTTP without a session id, or one on
    another transport (an in-memory client), has no connection to remember."""

    def __init__(self, *, stdio: bool = False, limit: int = MAX_CONNECTIONS) -> None:
        self.stdio = stdio
        self.limit = limit
        self._tokens: OrderedDict[str, str] = OrderedDict()

    def key(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        request = ctx.request
        if request is None:
            return "stdio" if self.stdio else None
        if isinstance(request, Request):
            sid = request.headers.get(_MCP_SESSION_HEADER)
            return "http:" + sid if sid else None
        return None

    def get(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        key = self.key(ctx)
        return self._tokens.get(key) if key is not None else None

    def remember(self, ctx: ServerRequestContext[Any, Any], token: str) -> None:
        key = self.key(ctx)
        if key is None or key in self._tokens:
            return
        self._tokens[key] = token
        while len(self._tokens) > self.limit:
            self._tokens.popitem(last=False)


def _presented(
    ctx: ServerRequestContext[Any, Any], tokens: ConnectionTokens
) -> tuple[str | None, str | None]:
    """The session token a tool call presents (its ``_meta`` ``fak/session``, else the
    HTTP ``X-Fak-Session`` header, else the one its connection got earlier) and the
    operator key (``X-Fak-Operator-Key``, over HTTP only)."""
    request = ctx.request
    headers = request.headers if isinstance(request, Request) else None
    meta = ctx.meta or {}
    token = meta.get(SESSION_META)
    if not isinstance(token, str):
        token = headers.get(SESSION_HEADER) if headers is not None else None
    if token is None:
        token = tokens.get(ctx)
    return token, headers.get(OPERATOR_HEADER) if headers is not None else None


def _claim(
    state: GatewayState,
    tokens: ConnectionTokens,
    ctx: ServerRequestContext[Any, Any],
    trace: str,
    doc: dict[str, Any],
    header_trace: str | None,
) -> str | None:
    """Claim ``trace`` as the HTTP routes do (:meth:`Sessions.claim`), with the token and
    operator key the call presents (:func:`_presented`). A trace none of the ids the call
    gave names (the body's ``trace_id``, ``header_trace``, the default) was minted for it.
    The token the client should keep (bound or minted; remembered for its connection), or
    None; a :class:`SessionError` when the trace is someone else's."""
    named = (doc.get("trace_id"), header_trace, state.default_trace)
    token, operator = _presented(ctx, tokens)
    fresh = not any(isinstance(n, str) and n.strip(BLANK) == trace for n in named)
    bound = state.sessions.claim(trace, token, fresh=fresh, operator=operator)
    if bound is not None:
        tokens.remember(ctx, bound)
    return bound


def _result(body: dict[str, Any], token: str | None) -> types.CallToolResult:
    return _bound(
        types.CallToolResult(
            content=[types.TextContent(text=json.dumps(body, ensure_ascii=False))],
            structured_content=body,
        ),
        token,
    )


def _bound(result: types.CallToolResult, token: str | None) -> types.CallToolResult:
    """``result`` carrying the session token its call bound, if any, in ``_meta`` (D12)."""
    if token is not None:
        result.meta = {SESSION_META: token}
    return result


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


async def _session_refusals(
    answer: Awaitable[types.CallToolResult],
) -> types.CallToolResult:
    """``answer``, or the error result a call the session rules refuse gets (D12): what to
    send (and the token's place over MCP), and the state's own words when it cannot
    tell the trace's owner."""
    try:
        return await answer
    except SessionError as exc:
        return _error(exc.message + _MCP_HINT)
    except StateUnavailable as exc:
        return _error(str(exc))


def stdio_mcp_server(state: GatewayState) -> Server[Any]:
    """The server of ``fak mcp``: one client over stdio, whose first token its connection
    remembers (:class:`ConnectionTokens`)."""
    return build_mcp_server(state, stdio=True)


def build_mcp_server(state: GatewayState, *, stdio: bool = False) -> Server[Any]:
    """An MCP server whose three tools decide through ``state`` (the one seam); ``stdio``:
    it serves one client over stdio (:class:`ConnectionTokens`)."""
    tokens = ConnectionTokens(stdio=stdio)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(_TOOLS))

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name = params.name
        doc = dict(params.arguments or {})
        header_trace = _header_trace(ctx)
        with state.request_scope():  # one journal request scope per tool call
            return await _session_refusals(_call(ctx, name, doc, header_trace))

    async def _call(
        ctx: ServerRequestContext[Any, Any],
        name: str,
        doc: dict[str, Any],
        header_trace: str | None,
    ) -> types.CallToolResult:
        try:
            if name == "fak_adjudicate":
                call = parse_call(doc).build(state, header_trace)
                token = _claim(state, tokens, ctx, call.trace_id, doc, header_trace)
                body = await state.adjudicate_async(call)
                return _result(await state.recorded(body), token)
            if name == "fak_syscall":
                call = parse_call(doc).build(state, header_trace)
                token = _claim(state, tokens, ctx, call.trace_id, doc, header_trace)
                body = await anyio.to_thread.run_sync(state.syscall, call)
                return _result(await state.recorded(body), token)
            if name == "fak_admit":
                req = parse_admit(doc)
                call = req.build(state, header_trace)
                token = _claim(state, tokens, ctx, call.trace_id, doc, header_trace)
                body = await anyio.to_thread.run_sync(state.admit, call, req.result)
                return _result(await state.recorded(body), token)
        except WireError as exc:
            return _error(exc.message)
        known = ", ".join(t.name for t in _TOOLS)
        raise MCPError(
            code=INVALID_PARAMS, message=f"unknown tool: {name} (this server has {known})"
        )

    return Server(
        SERVER_NAME,
        version=fak_core.__version__,
        instructions="Route every tool call through fak_adjudicate or fak_syscall before it "
        "runs, and every result you produced yourself through fak_admit.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _frame_error(line: bytes, max_frame: int) -> types.JSONRPCError | None:
    """The JSON-RPC error a stdio frame earns before the SDK sees it, or None if it is sound.

    The SDK drops frames it cannot parse without a word; a client then waits forever.
    Here every such frame gets the protocol's answer: -32700 for text that is not JSON,
    -32600 for JSON that is not a JSON-RPC 2.0 message, is over the size limit, nests
    deeper than the SDK's own JSON reader goes (about 200 levels, where orjson reads 1024),
    or holds what that reader refuses where orjson does not (a number whose mantissa has
    over 4300 digits, brought into range by its exponent).
    The message is validated from its text exactly as the SDK will read it, so nothing
    this lets through can be dropped there.
    """
    if len(line) > max_frame:
        return _rpc_error(None, INVALID_REQUEST, f"frame exceeds maximum size of {max_frame} bytes")
    too_deep = depth_error(line)
    if too_deep is not None:
        return too_deep
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return _rpc_error(None, PARSE_ERROR, f"parse error: {exc}")
    if not isinstance(doc, dict):
        return _rpc_error(None, INVALID_REQUEST, "invalid request: send one JSON-RPC object")
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        rid = doc.get("id")
        rid = rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None
        first = exc.errors()[0]
        if first.get("type") == "json_invalid":  # valid JSON the SDK's reader cannot take
            why = f"invalid request: this server cannot read the frame ({first['msg']})"
            return _rpc_error(rid, INVALID_REQUEST, why)
        where = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int))
        return _rpc_error(rid, INVALID_REQUEST, f"invalid request: {where}: {first['msg']}")
    return None


def depth_error(raw: bytes) -> types.JSONRPCError | None:
    """-32600 for a JSON-RPC message nested deeper than the gateway reads
    (:data:`~fak_core.jsondepth.MAX_JSON_DEPTH`, orjson's own 1024 included), else None
    (also for text that is not JSON: that is a parse error, answered elsewhere)."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth limit" not in str(exc):
            return None
        too_deep = JsonTooDeep(MAX_JSON_DEPTH, "the JSON-RPC message")
        return _rpc_error(_id_of(raw), INVALID_REQUEST, f"invalid request: {too_deep}")
    if not isinstance(doc, dict | list):
        return None
    try:
        check_depth(raw, what="the JSON-RPC message")
    except JsonTooDeep as exc:
        rid = doc.get("id") if isinstance(doc, dict) else None
        rid = rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None
        return _rpc_error(rid, INVALID_REQUEST, f"invalid request: {exc}")
    return None


def _id_of(raw: bytes) -> str | int | None:
    """The request id of a message too deep to parse whole, when it stands before the
    deep part (``{"jsonrpc":"2.0","id":7,...``), else None."""
    m = _LEADING_ID.match(raw)
    if m is None:
        return None
    try:
        rid = orjson.loads(m.group(1))
    except orjson.JSONDecodeError:
        return None
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


#: The id must end where the value ends: a number with a fraction or an exponent (``1.5``)
#: is no id this reads, never the integer its first digits spell (``1``).
_LEADING_ID = re.compile(
    rb'\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")'
    rb"(?=\s*[,}])"
)


def _rpc_error(rid: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=message)
    )


class _CheckedStdin:
    """stdin as the SDK's line source, answering malformed frames instead of dropping them."""

    def __init__(self, source: BinaryIO, max_frame: int) -> None:
        self.source = source
        self.max_frame = max_frame
        self.ready = anyio.Event()
        self.replies: Any = None  # the server's write stream, set once the transport is up

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _readline(self, limit: int) -> bytes:
        return await anyio.to_thread.run_sync(self.source.readline, limit, abandon_on_cancel=True)

    async def _lines(self) -> AsyncIterator[str]:
        await self.ready.wait()
        limit = self.max_frame + 1
        while True:
            line = await self._readline(limit)
            if not line:
                return
            if len(line) == limit and not line.endswith(b"\n"):
                while True:  # discard the rest of the oversized frame, bounded per read
                    more = await self._readline(limit)
                    if not more or more.endswith(b"\n"):
                        break
            elif not line.strip():  # a blank line; an oversized one is answered by its size
                continue
            error = _frame_error(line.rstrip(b"\r\n"), self.max_frame)
            if error is not None:
                await self.replies.send(SessionMessage(error))
                continue
            yield line.decode("utf-8", "replace")


async def run_stdio(
    state: GatewayState,
    *,
    stdin: BinaryIO | None = None,
    stdout: Any = None,
    max_frame: int = MAX_FRAME,
) -> None:
    """Serve the MCP tools over stdin/stdout (one JSON-RPC message per line) until EOF."""
    server = stdio_mcp_server(state)
    checked = _CheckedStdin(stdin if stdin is not None else sys.stdin.buffer, max_frame)
    # the SDK leaves the ends it hands out open: they are closed here, on the way out
    async with (
        stdio_server(stdin=checked, stdout=stdout) as (read_stream, write_stream),  # type: ignore[arg-type]
        read_stream,
        write_stream,
    ):
        checked.replies = write_stream
        checked.ready.set()
        await server.run(read_stream, write_stream, server.create_initialization_options())
