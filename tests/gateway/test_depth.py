"""One JSON depth limit for the whole gateway, on a real loopback server.

Every surface gets bodies nested at every depth across the boundary (and at orjson's
writer limit 254/255/256, its reader limit 1024 and far past it): a body the gateway reads
is answered (200, a verdict or a turn), a deeper one is a clear 400 (a -32600 on MCP),
and nothing is ever a 5xx. The oracle is the depth of the text this file builds, counted
by construction, not by the gateway's own counter.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fak_core.gateway import GatewayState, UpstreamConfig, create_app, proxy_routes
from fak_core.gateway.mcp_server import depth_error
from fak_core.jsondepth import MAX_JSON_DEPTH, JsonTooDeep, dumps, json_depth, loads
from pytest_fak.fixtures import serve_app

from .support import make_kernel

LIMIT = MAX_JSON_DEPTH
#: Around the limit, and orjson's writer (254) and reader (1024) limits, and far past.
DEPTHS = st.one_of(
    st.integers(max(0, LIMIT - 3), LIMIT + 3),
    st.sampled_from([1, 64, 254, 255, 256, 1023, 1024, 1025, 100_000]),
    st.integers(0, 1100),
)
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def nest(n: int) -> str:
    return "[" * n + "]" * n


def _native(route: str, field: str) -> tuple[str, Callable[[str], str], int]:
    return route, lambda n: f'{{"tool":"echo","{field}":{{"a":{n}}}}}', 2


def _openai(stream: bool) -> tuple[str, Callable[[str], str], int]:
    s = '"stream":true,' if stream else ""
    return (
        "/v1/chat/completions",
        lambda n: (
            '{"model":"m",' + s + '"messages":[{"role":"user","content":"hi"},'
            '{"role":"tool","tool_call_id":"c","content":'
            '[{"type":"text","text":"t","v":' + n + "}]}]}"
        ),
        5,
    )


def _anthropic(stream: bool) -> tuple[str, Callable[[str], str], int]:
    s = '"stream":true,' if stream else ""
    return (
        "/v1/messages",
        lambda n: (
            '{"model":"m","max_tokens":10,' + s + '"messages":[{"role":"user","content":'
            '[{"type":"tool_result","tool_use_id":"c","content":[{"type":"x","v":' + n + "}]}]}]}"
        ),
        7,
    )


def _mcp(tool: str, field: str) -> tuple[str, Callable[[str], str], int]:
    return (
        "/mcp",
        lambda n: (
            '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"'
            + tool
            + '","arguments":{"tool":"echo","'
            + field
            + '":{"a":'
            + n
            + "}}}}"
        ),
        4,
    )


SURFACES = {
    "adjudicate": _native("/v1/fak/adjudicate", "arguments"),
    "syscall": _native("/v1/fak/syscall", "arguments"),
    "admit": _native("/v1/fak/admit", "result"),
    "openai": _openai(False),
    "openai-stream": _openai(True),
    "anthropic": _anthropic(False),
    "anthropic-stream": _anthropic(True),
    "mcp-adjudicate": _mcp("fak_adjudicate", "arguments"),
    "mcp-admit": _mcp("fak_admit", "result"),
}


def _deep_tool(args: dict[str, Any]) -> Any:
    value: Any = "bottom"
    for _ in range(int(args.get("depth", 0))):
        value = [value]
    return value


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[httpx.Client, dict[str, str]]]:
    kernel = make_kernel()
    kernel.register_tool("get_deep", _deep_tool)
    state = GatewayState(kernel)
    app = create_app(state, extra_routes=proxy_routes(state, None))
    with serve_app(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        r = client.post(
            "/mcp",
            headers=MCP_HEADERS,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "depth-test", "version": "1"},
                },
            },
        )
        assert r.status_code == 200, r.text
        session = {**MCP_HEADERS, "mcp-session-id": r.headers["mcp-session-id"]}
        client.post(
            "/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        yield client, session


def _send(
    client: httpx.Client, session: dict[str, str], surface: str, depth: int
) -> tuple[int, str, int]:
    route, build, wrap = SURFACES[surface]
    inner = max(0, depth - wrap)
    body = build(nest(inner) if inner else "0")
    total = wrap + inner
    assert json_depth(body) == total  # the oracle: depth by construction
    headers = session if route == "/mcp" else {"content-type": "application/json"}
    r = client.post(route, content=body, headers=headers)
    return r.status_code, r.text, total


@pytest.mark.fak_theorem("D10.7")
@pytest.mark.parametrize("surface", sorted(SURFACES))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(depth=DEPTHS)
def test_every_surface_reads_what_it_can_write_and_refuses_the_rest(
    gateway: tuple[httpx.Client, dict[str, str]], surface: str, depth: int
) -> None:
    client, session = gateway
    status, text, total = _send(client, session, surface, depth)
    assert status < 500, (surface, total, text[:300])
    if total <= LIMIT:
        assert status == 200, (surface, total, text[:300])
        return
    assert status == 400, (surface, total, text[:300])
    assert f"deeper than {LIMIT} levels" in text, text[:300]
    if surface.startswith("mcp"):
        assert '"code":-32600' in text.replace(" ", ""), text[:300]


@pytest.mark.fak_theorem("D10.7")
@pytest.mark.parametrize("depth", [254, 255, 256, 1024, 100_000])
def test_a_tool_result_of_any_depth_is_written_back(
    gateway: tuple[httpx.Client, dict[str, str]], depth: int
) -> None:
    client, _ = gateway
    r = client.post("/v1/fak/syscall", json={"tool": "get_deep", "arguments": {"depth": depth}})
    assert r.status_code == 200, r.text[:300]
    body = r.json()
    assert body["verdict"]["kind"] == "ALLOW"
    content = body["result"]["content"]
    # paged out when long; otherwise exactly the nested value
    assert content.startswith('{"_paged":true') or content == (
        "[" * depth + '"bottom"' + "]" * depth
    )


@pytest.mark.fak_theorem("D10.7")
@pytest.mark.parametrize("depth", [0, 1, 254, 255, 256, 1024, 100_000])
def test_the_writer_never_fails_on_depth(depth: int) -> None:
    value: Any = 1
    for _ in range(depth):
        value = {"k": [value]}
    assert dumps(value) == b'{"k":[' * depth + b"1" + b"]}" * depth


# ---------------------------------------------------------------- upstream documents
def _deep_upstream(depth: int) -> Starlette:
    deep = nest(depth)

    async def openai(request: Request) -> Response:
        doc = await request.json()
        if doc.get("stream"):
            frame = (
                '{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
                '"delta":{"content":"hi"},"finish_reason":null}],"x":' + deep + "}"
            )
            return Response(f"data: {frame}\n\ndata: [DONE]\n\n", media_type="text/event-stream")
        body = (
            '{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,'
            '"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"x":'
            + deep
            + "}"
        )
        return Response(body, media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", openai, methods=["POST"])])


@pytest.mark.fak_theorem("D10.7")
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("depth", [LIMIT - 1, LIMIT, 254, 256, 1024, 100_000])
def test_an_upstream_document_too_deep_is_a_502_not_a_500(stream: bool, depth: int) -> None:
    with serve_app(_deep_upstream(depth)) as up:
        state = GatewayState(make_kernel())
        cfg = UpstreamConfig(base_url=up + "/v1", timeout=10.0)
        app = create_app(state, extra_routes=proxy_routes(state, cfg), mcp=False)
        with serve_app(app) as url:
            body = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "x"}]}
            r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code < 500 or r.status_code == 502, r.text[:300]
    if depth + 1 <= LIMIT:
        assert r.status_code == 200, r.text[:300]
    elif stream:
        # the first event is already the bad one: an ordinary 502 before the stream starts
        assert r.status_code == 502, r.text[:300]
        assert "upstream_malformed" in r.text
    else:
        assert r.status_code == 502 and "upstream_malformed" in r.text, r.text[:300]


WRAPS = (("{}", 0), ('{"a":%s}', 1), ('[1,"]]]",%s]', 1), ('{"s":"[[[\\"{{","v":[%s]}', 2))


@pytest.mark.fak_theorem("D10.7")
@given(depth=DEPTHS, wrap=st.sampled_from(WRAPS))
@example(depth=LIMIT + 1, wrap=WRAPS[1])
@example(depth=1025, wrap=WRAPS[1])
@example(depth=100_000, wrap=WRAPS[3])
def test_the_reader_refuses_exactly_what_is_past_the_limit(
    depth: int, wrap: tuple[str, int]
) -> None:
    template, levels = wrap
    inner = max(0, depth - levels) if "%s" in template else 0
    text = template.replace("%s", nest(inner) if inner else "0")
    total = levels + inner if "%s" in template else 1
    frame = '{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":' + text + "}}"
    error = depth_error(frame.encode())
    if total <= LIMIT:
        assert loads(text) is not None
        assert json_depth(text) == total
        assert error is None or total + 2 > LIMIT
    else:
        with pytest.raises(JsonTooDeep, match=f"deeper than {LIMIT} levels"):
            loads(text)
    if total + 2 > LIMIT:  # the frame puts two levels around it
        assert error is not None
        assert (error.id, error.error.code) == (7, -32600), error
    else:
        assert error is None


@pytest.mark.fak_theorem("D10.7")
@pytest.mark.parametrize("depth", [LIMIT + 1, 1024, 1025, 100_000])
@pytest.mark.parametrize(
    ("rid", "want"), [("7", 7), ('"a"', "a"), ("true", None), ("1.5", None), ("null", None)]
)
def test_a_frame_too_deep_is_named_and_keeps_only_a_valid_id(
    depth: int, rid: str, want: Any
) -> None:
    frame = '{"jsonrpc":"2.0","id":' + rid + ',"method":"ping","params":' + nest(depth) + "}"
    error = depth_error(frame.encode())
    assert error is not None
    assert (error.id, error.error.code) == (want, -32600)
    assert error.error.message.startswith(
        f"invalid request: the JSON-RPC message nests deeper than {LIMIT} levels"
    ), error.error.message


@pytest.mark.fak_theorem("D10.7")
@pytest.mark.parametrize("text", ["[1,", "{not json", '{"a":}', "", "]"])
def test_text_that_is_not_json_is_a_parse_error_not_a_depth_error(text: str) -> None:
    with pytest.raises(orjson.JSONDecodeError) as info:
        loads(text)
    assert not isinstance(info.value, JsonTooDeep)
    assert depth_error(text.encode()) is None  # answered elsewhere, as a parse error


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [LIMIT - 3, LIMIT, 254, 500])  # the SDKs encode ~990 at most
def test_official_clients_get_the_depth_limit_as_their_own_bad_request(
    gateway: tuple[httpx.Client, dict[str, str]], depth: int
) -> None:
    client, _ = gateway
    url = str(client.base_url).rstrip("/")
    extra = {"metadata_extra": _nested(depth)}
    oa = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=30)
    an = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, timeout=30)
    try:
        if depth + 1 <= LIMIT:
            done = oa.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], extra_body=extra
            )
            assert done.choices
            msg = an.messages.create(
                model="m",
                max_tokens=16,
                messages=[{"role": "user", "content": "hi"}],
                extra_body=extra,
            )
            assert msg.content is not None
            return
        with pytest.raises(openai.BadRequestError, match=f"deeper than {LIMIT} levels"):
            oa.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], extra_body=extra
            )
        with pytest.raises(anthropic.BadRequestError, match=f"deeper than {LIMIT} levels"):
            an.messages.create(
                model="m",
                max_tokens=16,
                messages=[{"role": "user", "content": "hi"}],
                extra_body=extra,
            )
    finally:
        oa.close()
        an.close()


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4)


#: text with lone surrogates too (Python strings may carry them; JSON escapes them)
any_text = st.text(st.characters(codec=None, exclude_categories=()))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | any_text,
    _containers,
    max_leaves=40,
)


def _depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth_of, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth_of, value.values()), default=0)
    return 0


@pytest.mark.fak_theorem("D10.7")
@given(value=json_values, ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
@example(value=[{"k": ["\ud800", "\udfff x"]}], ascii_only=False, indent=None)
def test_the_depth_scan_agrees_with_the_value(value: Any, ascii_only: bool, indent: Any) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert json_depth(text) == _depth_of(value)
    assert json_depth(dumps(value)) == _depth_of(value)
