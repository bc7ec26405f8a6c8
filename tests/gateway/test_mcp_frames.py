"""D10.7 on MCP stdio: no frame goes unanswered, whatever it is, and serving goes on.

``fak mcp``'s stdio loop (:func:`fak_core.gateway.mcp_server.run_stdio`) is served in this
process over a real pipe: the witness writes one raw frame at a time, then a ``ping``,
and reads every line the server writes before the ping's answer. The expected answer is
written here from JSON-RPC 2.0 and the MCP SDK's message types, not from the server's
code: -32700 (id null) for text that is not JSON, -32600 (id null) for JSON that is not an
object or for a frame over the frame limit (naming the limit), -32600 with the frame's id
(a string or an integer, else null) naming the first field the SDK's reader refuses or
saying that it cannot read the text at all (valid JSON its reader refuses: a number of
over 4300 mantissa digits), and nothing for a blank line; a frame the SDK reads is the
SDK's to answer.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from fak_core.gateway.mcp_server import run_stdio
from fak_core.gateway.state import GatewayState
from tests.gateway.mcp_stdio import init_frame
from tests.gateway.support import make_kernel

MAX_FRAME = 400
PARSE, INVALID_REQUEST = -32700, -32600
INIT = init_frame("frames")


class Lines:
    """The server's stdout: each written line, in order."""

    def __init__(self) -> None:
        send: MemoryObjectSendStream[str]
        recv: MemoryObjectReceiveStream[str]
        send, recv = anyio.create_memory_object_stream[str](1000)
        self.send, self.recv = send, recv
        self.buffer = ""

    async def write(self, text: str) -> None:
        self.buffer += text
        while "\n" in self.buffer:
            line, self.buffer = self.buffer.split("\n", 1)
            await self.send.send(line)

    async def flush(self) -> None:
        return None


class Client:
    def __init__(self, fd: int, out: Lines) -> None:
        self.fd = fd
        self.out = out
        self.pings = 1000

    def write(self, raw: bytes) -> None:
        view = memoryview(raw)
        while view:
            view = view[os.write(self.fd, view) :]

    async def answers(self, frame: bytes) -> list[dict[str, Any]]:
        """Everything the server answers to ``frame`` (a line of its own), in order."""
        self.pings += 1
        self.write(frame + b"\n")
        self.write(json.dumps({"jsonrpc": "2.0", "id": self.pings, "method": "ping"}).encode())
        self.write(b"\n")
        got: list[dict[str, Any]] = []
        with anyio.fail_after(10):
            while True:
                doc = json.loads(await self.out.recv.receive())
                if doc.get("id") == self.pings and "result" in doc:
                    return got
                got.append(doc)


@asynccontextmanager
async def stdio(max_frame: int = MAX_FRAME) -> AsyncIterator[Client]:
    """``fak mcp`` on a pipe in this process, initialised; stdin is closed on exit and the
    server must then stop (EOF ends it)."""
    state = GatewayState(make_kernel())
    r, w = os.pipe()
    out = Lines()
    with os.fdopen(r, "rb") as stdin, out.send, out.recv:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: run_stdio(state, stdin=stdin, stdout=out, max_frame=max_frame))
            client = Client(w, out)
            try:
                client.write(json.dumps(INIT).encode() + b"\n")
                with anyio.fail_after(10):
                    first = json.loads(await out.recv.receive())
                assert first["result"]["serverInfo"]["name"] == "fak-gateway", first
                client.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
                yield client
            finally:
                os.close(w)  # EOF: the server returns on its own
    state.close()


def run(body: Callable[[Client], Any], max_frame: int = MAX_FRAME) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with stdio(max_frame) as client:
                await body(client)

    anyio.run(main)


def error_of(answers: list[dict[str, Any]]) -> tuple[Any, int, str]:
    assert len(answers) == 1, answers
    (doc,) = answers
    assert doc["jsonrpc"] == "2.0" and "result" not in doc, doc
    return doc["id"], doc["error"]["code"], doc["error"]["message"]


NOT_JSON = [b"this is not json {", b"{", b"nul", b"\xff\xfe", b'{"a":NaN}', b"\xef\xbb\xbf{}"]
NOT_OBJECTS = [b"[1, 2]", b"3", b'"ping"', b"null", b"true", b"[]"]
#: frames the SDK's reader refuses: (frame, the id the answer carries, the field named)
REFUSED: list[tuple[bytes, Any, str]] = [
    (b'{"jsonrpc":"1.0","id":5,"method":"ping"}', 5, "JSONRPCRequest.jsonrpc"),
    (b'{"jsonrpc":"1.0","id":"r-7","method":"ping"}', "r-7", "JSONRPCRequest.jsonrpc"),
    (b'{"jsonrpc":"1.0","id":-3,"method":"ping"}', -3, "JSONRPCRequest.jsonrpc"),
    (b"{}", None, "JSONRPCRequest.jsonrpc"),
    (b'{"jsonrpc":"2.0","id":"a","method":3}', "a", "JSONRPCRequest.method"),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', 1, "JSONRPCRequest.params"),
    (b'{"jsonrpc":"1.0","id":true,"method":"ping"}', None, "JSONRPCRequest.jsonrpc"),
    (b'{"jsonrpc":"1.0","id":1.5,"method":"ping"}', None, "JSONRPCRequest.jsonrpc"),
    (b'{"jsonrpc":"1.0","id":null,"method":"ping"}', None, "JSONRPCRequest.jsonrpc"),
    (b'{"jsonrpc":"1.0","id":[2],"method":"ping"}', None, "JSONRPCRequest.jsonrpc"),
]


@pytest.mark.fak_theorem("D10.7")
def test_every_frame_the_sdk_cannot_read_is_answered_and_serving_goes_on() -> None:
    async def body(client: Client) -> None:
        for frame in NOT_JSON:
            rid, code, message = error_of(await client.answers(frame))
            assert (rid, code) == (None, PARSE), frame
            assert message.startswith("parse error: "), message
        for frame in NOT_OBJECTS:
            rid, code, message = error_of(await client.answers(frame))
            assert (rid, code) == (None, INVALID_REQUEST), frame
            assert message == "invalid request: send one JSON-RPC object", message
        for frame, want_id, field in REFUSED:
            rid, code, message = error_of(await client.answers(frame))
            assert (rid, code) == (want_id, INVALID_REQUEST), (frame, rid, code)
            assert message.startswith(f"invalid request: {field}: "), (frame, message)
            assert len(message) > len(f"invalid request: {field}: "), message
        for depth in (129, 150):  # deeper than 128; the SDK's own reader takes about 198
            deep = b"[" * depth + b"]" * depth
            frame = b'{"jsonrpc":"2.0","id":31,"method":"ping","params":{"a":' + deep + b"}}"
            rid, code, message = error_of(await client.answers(frame))
            assert (rid, code) == (31, INVALID_REQUEST), depth
            assert "deeper than 128 levels" in message, message
        for blank in (b"", b"   ", b"\t", b"\r"):
            assert await client.answers(blank) == [], blank  # nothing to answer

    run(body)


def _long_mantissa(digits: int) -> bytes:
    """A JSON number of ``digits + 1`` mantissa digits that its exponent brings back to 1."""
    return b"1" + b"0" * digits + b"e-" + str(digits).encode()


@pytest.mark.fak_theorem("D10.7")
def test_valid_json_the_sdks_reader_refuses_is_answered() -> None:
    """orjson reads a number of any length whose value is finite; the SDK's reader
    (pydantic-core) refuses a mantissa of over 4300 digits, CPython's limit for converting
    an integer's text, as ``json_invalid``. Such a frame is answered -32600, with its id
    where the id is a string or an integer; one digit fewer reaches the SDK, which answers."""

    async def body(client: Client) -> None:
        for digits in (4300, 4301, 6000):
            n = _long_mantissa(digits)
            for frame, want_id in (
                (b'{"jsonrpc":"2.0","id":41,"method":"ping","params":{"x":' + n + b"}}", 41),
                (b'{"jsonrpc":"2.0","id":"s","method":"ping","params":{"x":[' + n + b"]}}", "s"),
                (b'{"jsonrpc":"2.0","id":' + n + b',"method":"ping"}', None),
                (b'{"jsonrpc":"2.0","method":"notifications/x","params":{"n":' + n + b"}}", None),
            ):
                rid, code, message = error_of(await client.answers(frame))
                assert (rid, code) == (want_id, INVALID_REQUEST), (digits, frame[:60])
                assert message.startswith(
                    "invalid request: this server cannot read the frame (Invalid JSON: "
                ), message
        under = b'{"jsonrpc":"2.0","id":42,"method":"ping","params":{"_meta":{"x":'
        read = await client.answers(under + _long_mantissa(4299) + b"}}}")
        assert read == [{"jsonrpc": "2.0", "id": 42, "result": {}}], read

    run(body, max_frame=16384)


def _ping_of(size: int, rid: int) -> bytes:
    """A ping of exactly ``size`` bytes (its ``_meta`` padded)."""
    base = json.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "ping", "params": {"_meta": {"p": ""}}},
        separators=(",", ":"),
    ).encode()
    return base.replace(b'"p":""', b'"p":"' + b"x" * (size - len(base)) + b'"')


@pytest.mark.fak_theorem("D10.7")
@pytest.mark.parametrize("max_frame", [MAX_FRAME, MAX_FRAME + 1])
def test_a_frame_over_the_limit_is_answered_by_size_and_its_rest_never_read(
    max_frame: int,
) -> None:
    async def body(client: Client) -> None:
        at = await client.answers(_ping_of(max_frame, 7))
        assert at == [{"jsonrpc": "2.0", "id": 7, "result": {}}], at
        crlf = await client.answers(_ping_of(max_frame, 8) + b"\r")
        assert crlf == [{"jsonrpc": "2.0", "id": 8, "result": {}}], crlf
        for over in (1, 2, max_frame, 5 * max_frame + 3):
            # over the limit by one byte or by far: the tail would be a ping of its own
            frame = _ping_of(max_frame + over, 9)
            rid, code, message = error_of(await client.answers(frame))
            assert (rid, code) == (None, INVALID_REQUEST), over
            assert message == f"frame exceeds maximum size of {max_frame} bytes", message
        tail = b'{"jsonrpc":"2.0","id":11,"method":"ping"}'
        long = b" " * (2 * max_frame) + tail  # its tail alone is a sound frame
        rid, code, _ = error_of(await client.answers(long))
        assert (rid, code) == (None, INVALID_REQUEST)

    run(body, max_frame)


@pytest.mark.fak_theorem("D10.7")
def test_a_frame_the_sdk_reads_goes_to_it_unchanged() -> None:
    """Sound frames reach the SDK as sent (non-ASCII text included) and get its answers."""

    async def body(client: Client) -> None:
        call = {
            "jsonrpc": "2.0",
            "id": 21,
            "method": "tools/call",
            "params": {"name": "fak_adjudicate", "arguments": {"tool": "echo", "trace_id": "é-ü"}},
        }
        client.write(json.dumps(call, ensure_ascii=False).encode() + b"\n")
        with anyio.fail_after(10):
            doc = json.loads(await client.out.recv.receive())
        assert doc["id"] == 21, doc
        assert doc["result"]["structuredContent"]["trace_id"] == "é-ü", doc
        assert doc["result"]["structuredContent"]["verdict"]["kind"] == "ALLOW", doc
        unknown = await client.answers(b'{"jsonrpc":"2.0","id":22,"method":"no/such"}')
        assert [(d["id"], d["error"]["code"]) for d in unknown] == [(22, -32601)], unknown

    run(body)
