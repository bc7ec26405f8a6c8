"""The MCP proxy's downstream side: which servers it fronts, and one live connection to each.

A :class:`DownstreamSpec` names a server launched as a subprocess on stdio (``command``,
``args``, ``env``, ``cwd``) or reached over streamable HTTP (``url``, ``headers``).
:func:`load_servers` reads several from a JSON or TOML file. A :class:`Downstream` owns
one connection through the official ``mcp`` client: it connects lazily on first use,
bounds every request by a timeout, and turns every failure (the server crashed, hung or
answered garbage) into a :class:`DownstreamError` that says what happened. A crashed
connection is dropped and reopened lazily on the next request; the request that met the
crash is never re-sent, because it may already have had effects.

JSON-RPC error answers are read as the spec defines them (:func:`error_class`): -32700
parse error, -32600 invalid request, -32601 method not found, -32602 invalid params,
-32603 internal error, -32000..-32099 implementation-defined server errors, anything else
an application error. Each is a normal answer (kind ``error``, the server's
:class:`mcp_types.ErrorData` kept in :attr:`DownstreamError.remote` for the proxy to
admit), never a crash. The SDK reports a closed connection with the same code a server
may send (-32000, ``CONNECTION_CLOSED``), so the proxy watches the transport itself
(:class:`_Link`): only a transport that really ended (the process exited, the pipe
closed, or the server wrote a frame that is not JSON-RPC) is a crash. Every other
message of a :class:`DownstreamError` is written by the proxy: text the server chose
(an exception message, a field name of an invalid answer) goes to the operator's log,
never into ``detail``.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ErrorData,
)
from pydantic import ValidationError

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "Downstream",
    "DownstreamError",
    "DownstreamSpec",
    "ServerConfigError",
    "error_class",
    "load_config",
    "load_servers",
    "parse_servers",
]

DEFAULT_CALL_TIMEOUT = 30.0
#: A listing longer than this many pages is refused (a paginator that never ends).
MAX_LIST_PAGES = 100
# No '__' and no trailing '_': '<server>__<tool>' then splits at its first '__', always.
_NAME = re.compile(r"(?!.*__)[A-Za-z0-9_-]{0,63}[A-Za-z0-9-]")
HANDSHAKE_MIN_S = 15.0
_SPEC_KEYS = ("command", "args", "env", "cwd", "url", "headers", "timeout")


class ServerConfigError(ValueError):
    """A downstream server configuration that cannot be used; the message names the fix."""


_ERROR_CLASSES = {
    PARSE_ERROR: "parse error",
    INVALID_REQUEST: "invalid request",
    METHOD_NOT_FOUND: "method not found",
    INVALID_PARAMS: "invalid params",
    INTERNAL_ERROR: "internal error",
}


def error_class(code: int) -> str:
    """What a JSON-RPC error code means (JSON-RPC 2.0 section 5.1; MCP keeps it)."""
    named = _ERROR_CLASSES.get(code)
    if named is not None:
        return named
    if -32099 <= code <= -32000:
        return "server error"
    if -32768 <= code <= -32000:
        return "reserved"
    return "application error"


class DownstreamError(RuntimeError):
    """A downstream request that did not produce a usable answer.

    ``kind`` is one of ``unavailable`` (could not connect), ``crashed`` (the transport
    ended under the request), ``timeout`` (no answer in time), ``error`` (the server
    answered with a JSON-RPC error: :attr:`remote` holds it, unscreened) or ``protocol``
    (an answer that is not valid MCP). ``detail`` is the proxy's own words, never the
    server's.
    """

    def __init__(
        self, server: str, kind: str, message: str, *, remote: ErrorData | None = None
    ) -> None:
        super().__init__(f"downstream server {server!r} {kind}: {message}")
        self.server = server
        self.kind = kind
        self.detail = message
        self.remote = remote


@dataclass(frozen=True)
class DownstreamSpec:
    """One downstream MCP server: a stdio command or a streamable HTTP URL."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ServerConfigError(
                f"server name {self.name!r}: use 1-64 letters, digits, '_' or '-', with no "
                "'__' and not ending in '_' (it prefixes the server's tool names as "
                "'<server>__<tool>', which must split one way only)"
            )
        if bool(self.command) == bool(self.url):
            raise ServerConfigError(
                f"server {self.name!r}: give exactly one of 'command' (stdio) or 'url' "
                "(streamable HTTP)"
            )
        head, sep, rest = self.url.partition("://")
        if sep and head.isascii() and head.lower() in ("http", "https"):  # any case (RFC 3986)
            object.__setattr__(self, "url", head.lower() + sep + rest)
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ServerConfigError(f"server {self.name!r}: url must be http:// or https://")
        if self.timeout is not None and not self.timeout > 0:
            raise ServerConfigError(f"server {self.name!r}: timeout must be a positive number")

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"


def _str_list(name: str, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ServerConfigError(f"server {name!r}: {key!r} must be a list of strings")
    return tuple(value)


def _str_map(name: str, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ServerConfigError(f"server {name!r}: {key!r} must be a table of strings")
    return dict(value)


def parse_servers(doc: Any) -> list[DownstreamSpec]:
    """Validate a decoded servers document: ``{"servers": {name: spec, ...}}``.

    ``mcpServers`` (the key most MCP clients use in their own config files) is accepted
    as a synonym for ``servers``. Each spec has ``command`` (+ ``args``, ``env``, ``cwd``)
    or ``url`` (+ ``headers``), and optionally ``timeout`` in seconds.
    """
    if not isinstance(doc, dict):
        raise ServerConfigError("a servers file must be a JSON object / TOML table")
    keys = [k for k in ("servers", "mcpServers") if k in doc]
    unknown = sorted(set(doc) - {"servers", "mcpServers"})
    if unknown:
        raise ServerConfigError(f"unknown key {unknown[0]!r}: the file has one key, 'servers'")
    if len(keys) != 1:
        raise ServerConfigError("give the downstream servers under exactly one key, 'servers'")
    table = doc[keys[0]]
    if not isinstance(table, dict) or not table:
        raise ServerConfigError("'servers' must be a non-empty table of name -> server")
    specs: list[DownstreamSpec] = []
    for name, raw in table.items():
        if not isinstance(raw, dict):
            raise ServerConfigError(f"server {name!r}: expected a table")
        bad = sorted(set(raw) - set(_SPEC_KEYS))
        if bad:
            raise ServerConfigError(
                f"server {name!r}: unknown key {bad[0]!r}; valid keys: {', '.join(_SPEC_KEYS)}"
            )
        command = raw.get("command", "")
        url = raw.get("url", "")
        cwd = raw.get("cwd")
        timeout = raw.get("timeout")
        if not isinstance(command, str) or not isinstance(url, str):
            raise ServerConfigError(f"server {name!r}: 'command' and 'url' must be strings")
        if cwd is not None and not isinstance(cwd, str):
            raise ServerConfigError(f"server {name!r}: 'cwd' must be a string")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float)
        ):
            raise ServerConfigError(f"server {name!r}: 'timeout' must be a number of seconds")
        specs.append(
            DownstreamSpec(
                name=str(name),
                command=command,
                args=_str_list(name, "args", raw.get("args", [])),
                env=_str_map(name, "env", raw.get("env", {})),
                cwd=cwd,
                url=url,
                headers=_str_map(name, "headers", raw.get("headers", {})),
                timeout=float(timeout) if timeout is not None else None,
            )
        )
    return specs


_T = TypeVar("_T")


def load_config(path: str | Path, what: str, parse: Callable[[Any], _T]) -> _T:
    """Read the proxy's ``what`` file (TOML when it ends in ``.toml``, else JSON) and
    ``parse`` it; a failure to read, parse or check it is named with the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ServerConfigError(f"cannot read {what} file {p}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ServerConfigError(f"{what} file {p} is not UTF-8 text") from None
    try:
        doc = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ServerConfigError(f"{p}: not valid {p.suffix.lstrip('.') or 'JSON'}: {exc}") from None
    try:
        return parse(doc)
    except ServerConfigError as exc:
        raise ServerConfigError(f"{p}: {exc}") from None


def load_servers(path: str | Path) -> list[DownstreamSpec]:
    """Read a servers file (TOML when it ends in ``.toml``, else JSON)."""
    return load_config(path, "servers", parse_servers)


class _Link:
    """One connection's transport, watched: whether it has ended, and why.

    Wraps the SDK transport (stdio or streamable HTTP) that :class:`mcp.Client` drives.
    The read side ends the stream on the first item that is not a JSON-RPC message (the
    SDK would log it and read on: a desynchronised peer), and records the end of every
    stream; the write side records a broken pipe. The SDK only learns that a connection
    closed through one of these, so :attr:`ended` is set before it reports
    ``CONNECTION_CLOSED`` to a waiting request.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ended: str | None = None

    def end(self, why: str) -> None:
        if self.ended is None:
            self.ended = why

    async def __aenter__(self) -> tuple[_WatchedRead, _WatchedWrite]:
        read, write = await self.inner.__aenter__()
        return _WatchedRead(read, self), _WatchedWrite(write, self)

    async def __aexit__(self, *exc: Any) -> bool | None:
        self.end("the connection was closed")
        return await self.inner.__aexit__(*exc)  # type: ignore[no-any-return]


class _WatchedRead:
    """The read side of a :class:`_Link` (the SDK's ``ReadStream`` protocol)."""

    def __init__(self, inner: Any, link: _Link) -> None:
        self._inner = inner
        self._link = link

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        if self._link.ended is not None:
            raise anyio.EndOfStream
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._link.end("the server closed the connection")
            raise anyio.EndOfStream from None
        if isinstance(item, Exception):
            self._link.end(f"the server wrote a frame that is not JSON-RPC ({type(item).__name__})")
            raise anyio.EndOfStream
        return item

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class _WatchedWrite:
    """The write side of a :class:`_Link`."""

    def __init__(self, inner: Any, link: _Link) -> None:
        self._inner = inner
        self._link = link

    async def send(self, item: Any, /) -> None:
        try:
            await self._inner.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._link.end("the connection to the server broke")
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedWrite:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class Downstream:
    """One downstream server and at most one live connection to it.

    The connection lives in a task of the task group passed to :meth:`bind` (the proxy's),
    so that its subprocess and streams are torn down in the task that opened them.
    """

    def __init__(
        self,
        spec: DownstreamSpec,
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        errlog: TextIO | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.timeout = spec.timeout or call_timeout
        # Starting a server (a fresh interpreter, an npx package) can take seconds on a busy
        # machine: the handshake gets its own, longer bound than a call.
        self.handshake_timeout = max(self.timeout * 2, HANDSHAKE_MIN_S)
        self.errlog = errlog
        self.connects = 0
        self._tg: anyio.abc.TaskGroup | None = None
        self._client: Client | None = None
        self._link: _Link | None = None
        self._stop: anyio.Event | None = None
        self._closed: anyio.Event | None = None
        self._lock = anyio.Lock()

    def bind(self, tg: anyio.abc.TaskGroup) -> None:
        self._tg = tg

    @property
    def connected(self) -> bool:
        return self._client is not None

    def _make_client(self) -> tuple[Client, _Link, Any]:
        """The SDK client for this server, its watched transport, and the HTTP client it
        owns (if any)."""
        spec = self.spec
        target: Any
        http: Any = None
        if spec.url:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            http = create_mcp_http_client(headers=dict(spec.headers) or None)
            target = streamable_http_client(spec.url, http_client=http)
        else:
            from mcp.client.stdio import stdio_client

            target = stdio_client(
                StdioServerParameters(
                    command=spec.command,
                    args=list(spec.args),
                    env=dict(spec.env) or None,
                    cwd=spec.cwd,
                )
            )
        link = _Link(target)
        client = Client(link, read_timeout_seconds=self.handshake_timeout, cache=None)
        return client, link, http

    async def _own(self, *, task_status: anyio.abc.TaskStatus[Client]) -> None:
        stop = anyio.Event()
        closed = anyio.Event()
        self._stop, self._closed = stop, closed
        started = False
        http = None
        try:
            client, self._link, http = self._make_client()
            async with client:
                started = True
                task_status.started(client)
                await stop.wait()
        except Exception as exc:  # the connection failed or died: never take the proxy down
            if not started:
                raise
            self._log(f"connection closed: {_describe(exc)}")
        finally:
            if http is not None:
                with anyio.CancelScope(shield=True):
                    await http.aclose()
            closed.set()

    async def client(self) -> Client:
        """The live client, connecting first if there is none; raises :class:`DownstreamError`."""
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is not None:
                return self._client
            if self._tg is None:
                raise DownstreamError(self.name, "unavailable", "the proxy is not running")
            try:
                with anyio.fail_after(self.handshake_timeout):
                    self._client = await self._tg.start(self._own)
            except TimeoutError:
                raise DownstreamError(
                    self.name, "unavailable", f"no handshake within {self.handshake_timeout:g}s"
                ) from None
            except Exception as exc:
                # the handshake's failure may carry the server's words (an error answer to
                # initialize, an invalid result): they go to the operator's log only
                self._log(f"cannot connect: {_describe(exc)}")
                raise DownstreamError(
                    self.name,
                    "unavailable",
                    f"cannot connect ({_kind_of(exc)}; see the proxy's log)",
                ) from None
            self.connects += 1
            if self.connects > 1:
                self._log(f"reconnected (connection #{self.connects})")
            return self._client

    async def drop(self) -> None:
        """Close the current connection (the next request reconnects)."""
        client, stop, closed = self._client, self._stop, self._closed
        self._client = None
        if self._link is not None:
            self._link.end("the proxy closed the connection")
        if client is not None and stop is not None and closed is not None:
            stop.set()
            with anyio.move_on_after(10, shield=True):
                await closed.wait()

    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server lists, all pages (bounded)."""
        client = await self.client()
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            result = await self._request(client, "tools/list", client.list_tools(cursor=cursor))
            tools.extend(result.tools)
            cursor = result.next_cursor
            if not cursor:
                return tools
        raise DownstreamError(self.name, "protocol", f"tools/list ran past {MAX_LIST_PAGES} pages")

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Forward one adjudicated call; the answer must be a ``CallToolResult``."""
        client = await self.client()
        result = await self._request(
            client, "tools/call", client.session.call_tool(name, arguments)
        )
        if not isinstance(result, types.CallToolResult):
            raise DownstreamError(
                self.name, "protocol", f"tools/call answered {type(result).__name__}"
            )
        return result

    async def _request(self, client: Client, method: str, awaitable: Any) -> Any:
        """Await one request under :attr:`timeout` and classify every way it can fail.

        The bound is the proxy's own (the SDK's per-request timeout is longer), so an error
        with the SDK's timeout code (-32001) is the server's answer, like any other code.
        """
        link = self._link
        try:
            with anyio.fail_after(self.timeout):
                return await awaitable
        except TimeoutError:
            raise DownstreamError(
                self.name, "timeout", f"{method} got no answer within {self.timeout:g}s"
            ) from None
        except MCPError as exc:
            raise await self._error_answer(link, method, exc) from None
        except ValidationError as exc:
            self._log(f"{method} answer is not valid MCP: {_describe(exc)}")
            raise DownstreamError(
                self.name, "protocol", f"{method} answer is not valid MCP: {_first_error(exc)}"
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            await self.drop()
            raise DownstreamError(self.name, "crashed", f"{method}: {_kind_of(exc)}") from None
        except Exception as exc:
            self._log(f"{method} failed: {_describe(exc)}")
            raise DownstreamError(
                self.name, "protocol", f"{method} failed ({_kind_of(exc)}; see the proxy's log)"
            ) from None

    async def _error_answer(
        self, link: _Link | None, method: str, exc: MCPError
    ) -> DownstreamError:
        """An :class:`MCPError`: the SDK's own report of a transport that ended (a crash),
        or the server's JSON-RPC error answer (any code, -32000 included)."""
        if link is not None and link.ended is not None:
            await self.drop()
            return DownstreamError(self.name, "crashed", f"{method}: {link.ended}")
        code = exc.code
        return DownstreamError(
            self.name,
            "error",
            f"{method} answered JSON-RPC error {code} ({error_class(code)})",
            remote=exc.error,
        )

    def _log(self, message: str) -> None:
        out = self.errlog if self.errlog is not None else sys.stderr
        with contextlib.suppress(OSError, ValueError):
            print(f"fak mcp-proxy: downstream {self.name!r}: {message}", file=out, flush=True)


_SAFE_PART = re.compile(r"[A-Za-z0-9_]{1,40}")


def _first_error(exc: ValidationError) -> str:
    """Where and how an answer failed validation, in the proxy's words: the location's
    parts that are field names or indexes, and pydantic's error type (its message can
    quote the server's bytes; so can a location part, which is then shown as ``?``)."""
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return "invalid"
    e = errors[0]
    loc = ".".join(
        str(p) if isinstance(p, int) or _SAFE_PART.fullmatch(str(p)) else "?"
        for p in e.get("loc", ())
    )
    kind = str(e.get("type", "invalid"))
    return f"{loc}: {kind if _SAFE_PART.fullmatch(kind) else 'invalid'}"[:200]


def _kind_of(exc: BaseException) -> str:
    """The innermost exception's type name: what failed, never what it said."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return type(exc).__name__


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]
