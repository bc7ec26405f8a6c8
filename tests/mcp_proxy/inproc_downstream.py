"""An in-process scripted downstream for :class:`Downstream`: no subprocess, milliseconds.

:class:`ScriptedLink` is a transport (the SDK's ``Transport`` protocol) whose server side
is a task answering each request with what :attr:`ScriptedLink.script` says for its
method: a result, a JSON-RPC error, a frame that is not JSON-RPC (what the SDK's stdio
reader hands on for a line it cannot parse), the end of the stream (a crash), or nothing
(a hang). :func:`connected` builds a :class:`Downstream` over it, so everything from the
handshake to the classification of the answer runs in process, as in the proxy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client
from mcp.shared.message import SessionMessage

from fak_core.gateway.mcp_downstream import Downstream, DownstreamSpec, _Link

#: (what to do, its payload): ("result", dict), ("error", dict), ("garbage", None),
#: ("close", None), ("deaf", None), ("hang", None); "initialize" answers by
#: :attr:`ScriptedLink.handshake` when it is set
Action = tuple[str, Any]
Script = Callable[[str, dict[str, Any]], Action]


def _init_result(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "protocolVersion": params["protocolVersion"],
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "inproc", "version": "0"},
    }


@dataclass
class ScriptedLink:
    """A transport to an in-process server that answers by :attr:`script`."""

    script: Script
    #: each request's method and, for tools/call, the tool's name
    requests: list[tuple[str, str]] = field(default_factory=list)
    opened: int = 0
    #: raised by the client's next write (then cleared): a transport that fails itself
    write_error: BaseException | None = None
    #: how ``initialize`` is answered (None: a normal result)
    handshake: Action | None = None
    #: raised when a connection is closed (then cleared): a transport failing as it ends
    exit_error: BaseException | None = None

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Any]:
        self.opened += 1
        to_client, client_read = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        client_write, from_client = anyio.create_memory_object_stream[SessionMessage](16)
        async with anyio.create_task_group() as tg, to_client, from_client:
            tg.start_soon(self._serve, from_client, to_client)
            try:
                yield client_read, _FailingWrite(client_write, self)
            finally:
                tg.cancel_scope.cancel()
            error, self.exit_error = self.exit_error, None
            if error is not None:
                raise error

    async def _serve(self, inbox: Any, outbox: Any) -> None:
        async for item in inbox:
            msg = item.message
            if not isinstance(msg, types.JSONRPCRequest):
                continue  # a notification
            params = dict(msg.params or {})
            if msg.method == "initialize":
                action: Action = self.handshake or ("result", _init_result(params))
            elif msg.method not in ("tools/list", "tools/call"):  # server/discover included
                action = ("error", {"code": -32601, "message": "method not found"})
            else:
                self.requests.append((msg.method, str(params.get("name", ""))))
                action = self.script(msg.method, params)
            what, payload = action
            if what == "result":
                reply: Any = types.JSONRPCResponse(jsonrpc="2.0", id=msg.id, result=payload)
                await outbox.send(SessionMessage(reply))
            elif what == "error":
                err = types.ErrorData.model_validate(payload)
                await outbox.send(
                    SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=msg.id, error=err))
                )
            elif what == "garbage":
                await outbox.send(ValueError("}}} this is not JSON-RPC {{{"))
            elif what == "close":
                await outbox.aclose()
                return
            elif what == "deaf":  # stops reading: the client's next write breaks
                await inbox.aclose()
                return
            # "hang": no answer

    def __call__(self) -> Any:
        return self._open()


class _FailingWrite:
    """The client's write stream, raising :attr:`ScriptedLink.write_error` once when set."""

    def __init__(self, inner: Any, link: ScriptedLink) -> None:
        self._inner = inner
        self._link = link

    async def send(self, item: Any, /) -> None:
        error, self._link.write_error = self._link.write_error, None
        if error is not None:
            raise error
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _FailingWrite:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


def wire(d: Downstream, link: ScriptedLink) -> Downstream:
    """Send ``d``'s connections to ``link`` (before its first use)."""

    def make_client() -> tuple[Client, _Link, Any]:
        watched = _Link(link())
        return Client(watched, read_timeout_seconds=d.handshake_timeout, cache=None), watched, None

    d._make_client = make_client  # type: ignore[method-assign]
    return d


def connected(
    link: ScriptedLink, *, timeout: float = 5.0, name: str = "srv", errlog: Any = None
) -> Downstream:
    """A :class:`Downstream` whose connections go to ``link`` (bind it before use)."""
    d = Downstream(DownstreamSpec(name, command="unused", timeout=timeout), errlog=errlog)
    return wire(d, link)


@asynccontextmanager
async def running(d: Downstream) -> AsyncIterator[Downstream]:
    """``d`` bound to a task group, its connection dropped on the way out."""
    async with anyio.create_task_group() as tg:
        d.bind(tg)
        try:
            yield d
        finally:
            await d.drop()
