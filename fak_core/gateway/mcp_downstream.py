"""The MCP proxy's downstream side: which servers it fronts, and one live connection to each.

A :class:`DownstreamSpec` names a server launched as a subprocess on stdio (``command``,
``args``, ``env``, ``cwd``) or reached over streamable HTTP (``url``, ``headers``).
:func:`load_servers` reads several from a JSON or TOML file. A :class:`Downstream` owns
one connection through the official ``mcp`` client: it connects lazily on first use,
bounds every request by a timeout, and turns every failure (the server crashed, hung or
answered garbage) into a :class:`DownstreamError` that says what happened. A crashed
connection is dropped and reopened lazily on the next request; the request that met the
crash is never re-sent, because it may already have had effects.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "Downstream",
    "DownstreamError",
    "DownstreamSpec",
    "ServerConfigError",
    "load_servers",
    "parse_servers",
]

DEFAULT_CALL_TIMEOUT = 30.0
#: A listing longer than this many pages is refused (a paginator that never ends).
MAX_LIST_PAGES = 100
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
HANDSHAKE_MIN_S = 15.0
_SPEC_KEYS = ("command", "args", "env", "cwd", "url", "headers", "timeout")


class ServerConfigError(ValueError):
    """A downstream server configuration that cannot be used; the message names the fix."""


class DownstreamError(RuntimeError):
    """A downstream request that did not produce a usable answer.

    ``kind`` is one of ``unavailable`` (could not connect), ``crashed`` (the connection
    closed under the request), ``timeout`` (no answer in time) or ``protocol`` (an error
    response or an answer that is not valid MCP).
    """

    def __init__(self, server: str, kind: str, message: str) -> None:
        super().__init__(f"downstream server {server!r} {kind}: {message}")
        self.server = server
        self.kind = kind
        self.detail = message


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
        if not _NAME.match(self.name):
            raise ServerConfigError(
                f"server name {self.name!r}: use 1-64 letters, digits, '_' or '-' "
                "(it prefixes the server's tool names)"
            )
        if bool(self.command) == bool(self.url):
            raise ServerConfigError(
                f"server {self.name!r}: give exactly one of 'command' (stdio) or 'url' "
                "(streamable HTTP)"
            )
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


def load_servers(path: str | Path) -> list[DownstreamSpec]:
    """Read a servers file (TOML when it ends in ``.toml``, else JSON)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ServerConfigError(f"cannot read servers file {p}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ServerConfigError(f"servers file {p} is not UTF-8 text") from None
    try:
        doc = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ServerConfigError(f"{p}: not valid {p.suffix.lstrip('.') or 'JSON'}: {exc}") from None
    try:
        return parse_servers(doc)
    except ServerConfigError as exc:
        raise ServerConfigError(f"{p}: {exc}") from None


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
        self._stop: anyio.Event | None = None
        self._closed: anyio.Event | None = None
        self._lock = anyio.Lock()

    def bind(self, tg: anyio.abc.TaskGroup) -> None:
        self._tg = tg

    @property
    def connected(self) -> bool:
        return self._client is not None

    def _make_client(self) -> tuple[Client, Any]:
        """The SDK client for this server, and the HTTP client it owns (if any)."""
        spec = self.spec
        target: Any
        http: Any = None
        if spec.url:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            http = create_mcp_http_client(headers=dict(spec.headers) or None)
            target = streamable_http_client(spec.url, http_client=http)
        else:
            target = StdioServerParameters(
                command=spec.command,
                args=list(spec.args),
                env=dict(spec.env) or None,
                cwd=spec.cwd,
            )
        return Client(target, read_timeout_seconds=self.handshake_timeout, cache=None), http

    async def _own(self, *, task_status: anyio.abc.TaskStatus[Client]) -> None:
        stop = anyio.Event()
        closed = anyio.Event()
        self._stop, self._closed = stop, closed
        started = False
        http = None
        try:
            client, http = self._make_client()
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
                raise DownstreamError(self.name, "unavailable", _describe(exc)) from None
            self.connects += 1
            if self.connects > 1:
                self._log(f"reconnected (connection #{self.connects})")
            return self._client

    async def drop(self) -> None:
        """Close the current connection (the next request reconnects)."""
        client, stop, closed = self._client, self._stop, self._closed
        self._client = None
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
            client,
            "tools/call",
            client.session.call_tool(name, arguments, read_timeout_seconds=self.timeout),
        )
        if not isinstance(result, types.CallToolResult):
            raise DownstreamError(
                self.name, "protocol", f"tools/call answered {type(result).__name__}"
            )
        return result

    async def _request(self, client: Client, method: str, awaitable: Any) -> Any:
        try:
            with anyio.fail_after(self.timeout + 1):
                return await awaitable
        except TimeoutError:
            raise DownstreamError(
                self.name, "timeout", f"{method} got no answer within {self.timeout:g}s"
            ) from None
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise DownstreamError(
                    self.name, "timeout", f"{method} got no answer within {self.timeout:g}s"
                ) from None
            if exc.code == CONNECTION_CLOSED:
                await self.drop()
                raise DownstreamError(
                    self.name, "crashed", f"the connection closed during {method}"
                ) from None
            raise DownstreamError(
                self.name, "protocol", f"{method} returned error {exc.code}: {exc}"
            ) from None
        except ValidationError as exc:
            raise DownstreamError(
                self.name, "protocol", f"{method} answer is not valid MCP: {_first_error(exc)}"
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            await self.drop()
            raise DownstreamError(self.name, "crashed", f"{method}: {_describe(exc)}") from None
        except Exception as exc:
            raise DownstreamError(self.name, "protocol", f"{method}: {_describe(exc)}") from None

    def _log(self, message: str) -> None:
        out = self.errlog if self.errlog is not None else sys.stderr
        with contextlib.suppress(OSError, ValueError):
            print(f"fak mcp-proxy: downstream {self.name!r}: {message}", file=out, flush=True)


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)[:200]
    e = errors[0]
    loc = ".".join(str(p) for p in e.get("loc", ()))
    return f"{loc}: {e.get('msg', '')}"[:200]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]
