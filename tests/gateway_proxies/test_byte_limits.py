"""A7.5 at the wire: the 1 MiB arguments limit counts UTF-8 bytes on every surface that
decides (native HTTP, MCP over streamable HTTP, the OpenAI and Anthropic proxies through
their official SDKs), with characters of 2, 3 and 4 bytes; and arguments over the 64 KiB
inline bound are decided on a worker thread, however few characters they hold."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from fak_core import Kernel, Policy, ToolCall, VerdictKind, nonblocking
from fak_core.events import Event, EventKind
from fak_core.gateway import GatewayState, UpstreamConfig, proxy_routes
from fak_core.gateway.app import create_app
from fak_core.gateway.state import INLINE_ARGS_BYTES
from pytest_fak.fixtures import serve_app

from .clients import anthropic_client, openai_client
from .scripted_upstream import Script, ScriptedUpstream

LIMIT = 1 << 20
CHARS = {2: "\u00e9", 3: "\u20ac", 4: "\U0001f600"}


def sized(total: int, w: int) -> str:
    """A compact JSON object of exactly ``total`` bytes, mostly ``w``-byte characters."""
    budget = total - len('{"a":""}')
    return '{"a":"' + CHARS[w] * (budget // w) + "x" * (budget % w) + '"}'


def over(text: str) -> str:
    return text[:-2] + "x" + text[-2:]


@nonblocking
class DecidingThreads:
    """A subscriber (declared non-blocking, so the gateway may still decide inline) that
    records the thread each decision ran on, by the size of its arguments."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []

    def __call__(self, event: Event) -> None:
        if event.kind == EventKind.DECIDE:
            args = event.call.args
            size = len(args.encode() if isinstance(args, str) else args)
            self.seen.append((size, threading.current_thread().name))


@pytest.fixture
def served(upstream: ScriptedUpstream, upstream_url: str) -> Iterator[tuple[str, DecidingThreads]]:
    kernel = Kernel(Policy(allow=("send_email",)))
    threads = DecidingThreads()
    kernel.subscribe(threads)
    state = GatewayState(kernel)
    assert kernel.decides_without_waiting()
    cfg = UpstreamConfig(base_url=upstream_url + "/v1", timeout=30.0)
    with serve_app(create_app(state, extra_routes=proxy_routes(state, cfg))) as url:
        yield url, threads
    state.close()


def _kind(verdict: dict[str, Any]) -> tuple[str, str]:
    return verdict["kind"], verdict.get("reason", "NONE")


@pytest.mark.fak_theorem("A7.5")
@pytest.mark.parametrize("w", [2, 3, 4])
def test_native_http_counts_bytes_at_the_limit(served: tuple[str, DecidingThreads], w: int) -> None:
    url, _ = served
    text = sized(LIMIT, w)
    with httpx.Client(base_url=url, timeout=60) as c:
        for arguments, want in (
            (text, ("ALLOW", "NONE")),
            (json.loads(text), ("ALLOW", "NONE")),  # an object is measured as compact JSON
            (over(text), ("DENY", "OVERSIZE")),
            (json.loads(over(text)), ("DENY", "OVERSIZE")),
        ):
            r = c.post("/v1/fak/adjudicate", json={"tool": "send_email", "arguments": arguments})
            assert r.status_code == 200
            assert _kind(r.json()["verdict"]) == want


@pytest.mark.fak_theorem("A7.5")
def test_mcp_counts_bytes_at_the_limit(served: tuple[str, DecidingThreads]) -> None:
    url, _ = served

    async def main() -> list[tuple[str, str]]:
        out = []
        with anyio.fail_after(120):
            async with Client(f"{url}/mcp", mode="legacy") as client:
                for w in (2, 3, 4):
                    for text in (sized(LIMIT, w), over(sized(LIMIT, w))):
                        res = await client.call_tool(
                            "fak_adjudicate", {"tool": "send_email", "arguments": text}
                        )
                        out.append(_kind(json.loads(res.content[0].text)["verdict"]))
        return out

    assert anyio.run(main) == [("ALLOW", "NONE"), ("DENY", "OVERSIZE")] * 3


@pytest.mark.fak_theorem("A7.5")
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_the_proxies_count_bytes_at_the_limit(
    served: tuple[str, DecidingThreads], upstream: ScriptedUpstream, wire: str
) -> None:
    url, _ = served
    calls: list[tuple[str, Any]] = []
    for w in (2, 4):
        calls += [("send_email", sized(LIMIT, w)), ("send_email", over(sized(LIMIT, w)))]
    upstream.reset(Script(calls=calls))
    if wire == "openai":
        resp = openai_client(url).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "go"}]
        )
        fak = (resp.model_extra or {})["fak"]
    else:
        msg = anthropic_client(url).messages.create(
            model="m", max_tokens=16, messages=[{"role": "user", "content": "go"}]
        )
        fak = (msg.model_extra or {})["fak"]
    kinds = [_kind(a["verdict"]) for a in fak["adjudications"]]
    assert kinds == [("ALLOW", "NONE"), ("DENY", "OVERSIZE")] * 2


@pytest.mark.fak_theorem("A7.5")
@pytest.mark.parametrize("w", [2, 3, 4])
def test_over_the_inline_bound_is_decided_off_the_event_loop(
    served: tuple[str, DecidingThreads], w: int
) -> None:
    url, threads = served
    at, past = sized(INLINE_ARGS_BYTES, w), over(sized(INLINE_ARGS_BYTES, w))
    assert len(past) < INLINE_ARGS_BYTES  # a count of characters would decide it inline
    with httpx.Client(base_url=url, timeout=60) as c:
        for text in (at, past):
            r = c.post("/v1/fak/adjudicate", json={"tool": "send_email", "arguments": text})
            assert r.json()["verdict"]["kind"] == "ALLOW"
    where = dict(threads.seen)
    assert not where[INLINE_ARGS_BYTES].startswith("fak-decide")
    assert where[INLINE_ARGS_BYTES + 1].startswith("fak-decide")


@pytest.mark.fak_theorem("A7.5")
@pytest.mark.parametrize("w", [2, 3, 4])
def test_the_inline_bound_counts_bytes_in_process(w: int) -> None:
    """The same through :meth:`GatewayState.decide` on this thread: at the bound the
    decision runs here, one byte past it on a decision worker."""
    kernel = Kernel(Policy(allow=("send_email",)))
    threads = DecidingThreads()
    kernel.subscribe(threads)
    state = GatewayState(kernel)
    try:
        for text in (sized(INLINE_ARGS_BYTES, w), over(sized(INLINE_ARGS_BYTES, w))):
            assert state.decide(ToolCall("send_email", text)).kind == VerdictKind.ALLOW
    finally:
        state.close()
    here = threading.current_thread().name
    assert threads.seen[0] == (INLINE_ARGS_BYTES, here)
    assert threads.seen[1][0] == INLINE_ARGS_BYTES + 1
    assert threads.seen[1][1].startswith("fak-decide")
