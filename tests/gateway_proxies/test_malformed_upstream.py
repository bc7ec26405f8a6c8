"""D10.5: an upstream answer the gateway cannot read whole is an error, never a relayed call.

A raw upstream (in process) answers with the exact bytes each case gives: streams that
break the wire's event grammar (an error event, a block before ``message_start``, an index
that is not an integer, a block started twice, a delta for a block never started, a tool
use never stopped, no ``message_stop`` or ``[DONE]``, ``stop_reason: tool_use`` with no
tool use, a choice streaming both ``function_call`` and ``tool_calls``), and buffered
documents that do the same. Each case's oracle is written here: the status (and, once
content was relayed, the in-stream error event instead), a phrase of the message, and that
no tool use reached the client. Well-formed streams with pings, unknown event types and a
usage chunk are relayed, with their kept call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from fak_core.gateway import UpstreamConfig, proxy_routes

from .inprocess import fresh_trace
from .kernels import make_state

#: the raw upstream's answer: its bytes, media type, and whether the connection breaks
#: after them (``cut``)
_RAW: dict[str, Any] = {"body": b"", "media": "text/event-stream", "cut": False}


async def _answer(request: Request) -> Response:
    if not _RAW["cut"]:
        return Response(_RAW["body"], media_type=_RAW["media"])

    async def cut() -> AsyncIterator[bytes]:
        yield _RAW["body"]
        raise RuntimeError("the connection broke")

    return StreamingResponse(cut(), media_type=_RAW["media"])


_UP = Starlette(
    routes=[Route(p, _answer, methods=["POST"]) for p in ("/v1/chat/completions", "/v1/messages")]
)
_STATE = make_state()
_APP = Starlette(
    routes=proxy_routes(
        _STATE, UpstreamConfig(base_url="http://up/v1", transport=httpx.ASGITransport(app=_UP))
    )
)


def _sse(events: list[Any]) -> bytes:
    """The SSE text of ``events``; an event may name itself (``_event``) apart from its
    data's type, as a lying upstream would."""
    out = []
    for e in events:
        if isinstance(e, str):
            out.append(f"data: {e}\n\n")
        else:
            e = dict(e)
            name = e.pop("_event", e.get("type", "x"))
            out.append(f"event: {name}\ndata: {json.dumps(e)}\n\n")
    return "".join(out).encode()


START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
}
TEXT = [
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
    {"type": "content_block_stop", "index": 0},
]


def _use(idx: int, name: str = "get_user", stop: bool = True) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": f"toolu_{idx}", "name": name, "input": {}}
    out: list[dict[str, Any]] = [
        {"type": "content_block_start", "index": idx, "content_block": block},
        {
            "type": "content_block_delta",
            "index": idx,
            "delta": {"type": "input_json_delta", "partial_json": '{"id": 1}'},
        },
    ]
    return out + ([{"type": "content_block_stop", "index": idx}] if stop else [])


def _end(stop_reason: str = "end_turn") -> list[dict[str, Any]]:
    return [
        {"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {}},
        {"type": "message_stop"},
    ]


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps(
        {"id": "c", "object": "chat.completion.chunk", "created": 1, "choices": [choice], **extra}
    )


CALL = {"index": 0, "id": "call_0", "type": "function", "function": {"name": "get_user"}}
ARGS = {"index": 0, "function": {"arguments": '{"id": 1}'}}

#: (name, wire, the upstream's events, status (None: the stream starts, then an error
#: event), a phrase of the message)
STREAMS: list[tuple[str, str, list[Any], int | None, str]] = [
    (
        "error-first",
        "anthropic",
        [{"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}],
        503,
        "upstream stream error (overloaded_error): busy",
    ),
    (
        "error-unknown-type",
        "anthropic",
        [START, {"type": "error", "error": "down"}],
        502,
        "upstream stream error (api_error): ",
    ),
    (
        "error-after-text",
        "anthropic",
        [START, *TEXT, *_use(1), {"type": "error", "error": {"type": "rate_limit_error"}}],
        None,
        "(rate_limit_error)",
    ),
    (
        "start-not-object",
        "anthropic",
        [{"type": "message_start", "message": 3}],
        502,
        "message_start without a message",
    ),
    (
        "use-in-start",
        "anthropic",
        [{**START, "message": {**START["message"], "content": [_use(0)[0]["content_block"]]}}],
        502,
        "tool_use inside message_start",
    ),
    (
        "block-before-start",
        "anthropic",
        [*TEXT, *_end()],
        502,
        "content_block_start before message_start",
    ),
    (
        "index-not-int",
        "anthropic",
        [START, {**TEXT[0], "index": "0"}],
        502,
        "content_block_start without an integer index",
    ),
    (
        "index-bool",
        "anthropic",
        [START, {**TEXT[0], "index": True}],
        502,
        "without an integer index",
    ),
    (
        "started-twice",
        "anthropic",
        [START, *_use(0), *_use(0)],
        502,
        "content block 0 started twice",
    ),
    (
        "text-started-twice",
        "anthropic",
        [START, *TEXT, TEXT[0], *_end()],
        None,
        "content block 0 started twice",
    ),
    (
        "unknown-block",
        "anthropic",
        [START, TEXT[1]],
        502,
        "content_block_delta for unknown block 0",
    ),
    ("no-stop", "anthropic", [START, *_use(0), _end("tool_use")[0]], 502, "truncated"),
    ("no-delta", "anthropic", [START, *_use(0), _end()[1]], 502, "truncated"),
    (
        "use-unstopped",
        "anthropic",
        [START, *_use(0, stop=False), *_end("tool_use")],
        502,
        "tool_use block never stopped",
    ),
    (
        "stop-without-use",
        "anthropic",
        [START, *_end("tool_use")],
        502,
        "stop_reason is tool_use but no tool_use block was streamed",
    ),
    (
        "openai-error",
        "openai",
        [json.dumps({"error": {"message": "boom"}})],
        502,
        "upstream stream error: boom",
    ),
    (
        "openai-error-text",
        "openai",
        [json.dumps({"error": "flat"})],
        502,
        "upstream stream error: flat",
    ),
    (
        "openai-not-json",
        "openai",
        ["{not json"],
        502,
        "upstream OpenAI stream sent an event that is not JSON",
    ),
    (
        "anthropic-not-json",
        "anthropic",
        ["{not json"],
        502,
        "upstream Anthropic stream sent an event that is not JSON",
    ),
    ("openai-truncated", "openai", [_chunk({"tool_calls": [CALL]})], 502, "truncated"),
    ("openai-empty", "openai", [], 502, "truncated"),
    (
        "openai-both",
        "openai",
        [
            _chunk({"function_call": {"name": "get_user", "arguments": "{}"}}),
            _chunk({"tool_calls": [CALL]}, "tool_calls"),
            "[DONE]",
        ],
        502,
        "both function_call and tool_calls",
    ),
    (
        "openai-finish-without-call",
        "openai",
        [_chunk({"content": "x"}, "tool_calls"), "[DONE]"],
        None,
        "finish_reason is tool_calls but no tool call was streamed",
    ),
]

#: Well-formed streams: (name, wire, events, the tool names the client must receive)
GOOD: list[tuple[str, str, list[Any], list[str]]] = [
    (
        "pings-and-unknown-events",
        "anthropic",
        [
            {"type": "ping"},
            START,
            {"type": "ping"},
            {"type": "vendor_x"},
            *TEXT,
            *_use(1),
            *_end("tool_use"),
        ],
        ["get_user"],
    ),
    (
        "openai-usage-and-done",
        "openai",
        [
            _chunk({"role": "assistant", "content": "hi"}, usage={"total_tokens": 99}),
            _chunk({"tool_calls": [CALL]}),
            _chunk({"tool_calls": [ARGS]}, "tool_calls"),
            json.dumps(
                {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "choices": [],
                    "usage": {"total_tokens": 3},
                }
            ),
            "[DONE]",
        ],
        ["get_user"],
    ),
    (
        "openai-no-done-but-finished",
        "openai",
        [
            _chunk({"content": "hi"}),
            _chunk({"tool_calls": [CALL]}),
            _chunk({"tool_calls": [ARGS]}, "tool_calls"),
        ],
        ["get_user"],
    ),
]

NO_OBJECT = [
    json.dumps(
        {
            "id": "c",
            "created": 1,
            "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}],
        }
    ),
    "[DONE]",
]
GOOD += [
    ("openai-no-object", "openai", NO_OBJECT, []),
    ("openai-done-without-finish", "openai", [_chunk({"content": "hi"}), "[DONE]"], []),
    (
        "openai-junk-after-done",
        "openai",
        [_chunk({"content": "hi"}, "stop"), "[DONE]", "{not json", _chunk({"tool_calls": [CALL]})],
        [],
    ),
    ("anthropic-events-after-stop", "anthropic", [START, *TEXT, *_end(), *_use(1)], []),
    (
        "anthropic-use-with-end-turn",
        "anthropic",
        [START, {"type": "ping"}, *TEXT, *_use(1), *_end("end_turn")],
        ["get_user"],
    ),
]

NAMELESS = {"index": 0, "id": "call_0", "type": "function", "function": {"arguments": "{}"}}
GOOD += [
    ("openai-only-done", "openai", ["[DONE]"], []),
    (
        "openai-call-without-id",
        "openai",
        [
            _chunk({"tool_calls": [{k: v for k, v in CALL.items() if k != "id"}]}),
            _chunk({"tool_calls": [ARGS]}, "tool_calls"),
            "[DONE]",
        ],
        ["get_user"],
    ),
    (
        "openai-call-without-name",
        "openai",
        [_chunk({"tool_calls": [NAMELESS]}, "tool_calls"), "[DONE]"],
        [],
    ),
]

DENIED_USE = {"type": "tool_use", "id": "toolu_9", "name": "deny_thing", "input": {}}
WHOLE = {
    "type": "tool_use",
    "id": "toolu_1",
    "name": "get_user",
    "input": {"id": 1, "password": "pw"},
}
GOOD += [
    (
        # a refused use that names its event "ping": read by its data, so still refused
        "mislabelled-use",
        "anthropic",
        [
            START,
            {
                "_event": "ping",
                "type": "content_block_start",
                "index": 0,
                "content_block": DENIED_USE,
            },
            {"type": "content_block_stop", "index": 0},
            *_end(),
        ],
        [],
    ),
    (
        # the held use first, the text after it: the text is renumbered from 0
        "use-then-text",
        "anthropic",
        [START, *_use(0), *[{**e, "index": 1} for e in TEXT], *_end("tool_use")],
        ["get_user"],
    ),
    (
        # a use whose start carries its whole input (repaired: the password dropped)
        "whole-input",
        "anthropic",
        [
            START,
            {"type": "content_block_start", "index": 0, "content_block": WHOLE},
            {"type": "content_block_stop", "index": 0},
            *_end("tool_use"),
        ],
        ["get_user"],
    ),
]
STREAMS += [
    (
        "openai-function-finish-without-call",
        "openai",
        [_chunk({"content": "x"}, "function_call"), "[DONE]"],
        None,
        "finish_reason is tool_calls but no tool call was streamed",
    ),
    (
        "error-weird-type",
        "anthropic",
        [{"type": "error", "error": {"type": "weird_error", "message": "?"}}],
        502,
        "upstream stream error (weird_error): ?",
    ),
    (
        "two-unstopped",
        "anthropic",
        [
            START,
            *_use(0, stop=False),
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "x"},
            },
            *_end("tool_use"),
        ],
        502,
        "(tool_use block never stopped)",  # the first one, by its type
    ),
]

PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def check_openai_grammar(
    text: str, kept: list[str], legacy: bool = False, choices: bool = True
) -> list[Any]:
    """The client's stream, read as the OpenAI wire defines it: chunks of one completion
    (one id, ``chat.completion.chunk``, an integer ``created``), each choice with its
    index, delta and finish reason, each tool call delta whole (index, id, type, function
    name), one finish reason (``tool_calls``/``function_call`` when a call was kept, else
    ``stop``), and ``[DONE]`` last. Returns the chunks."""
    lines = [ln[6:] for ln in text.splitlines() if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]", lines[-1:]
    chunks = [json.loads(ln) for ln in lines[:-1]]
    assert len({c["id"] for c in chunks}) == 1, chunks
    finishes = []
    for c in chunks:
        assert c["object"] == "chat.completion.chunk" and isinstance(c["created"], int), c
        for ch in c["choices"]:
            assert set(ch) >= {"index", "delta", "finish_reason"} and ch["index"] == 0, ch
            if ch["finish_reason"]:
                finishes.append(ch["finish_reason"])
            for i, tc in enumerate(ch["delta"].get("tool_calls") or []):
                assert (tc["index"], tc["type"]) == (i, "function") and tc["id"], tc
                assert tc["function"]["name"] in kept, tc
    want = ("function_call" if legacy else "tool_calls") if kept else "stop"
    assert finishes == ([want] if choices else []), finishes
    return chunks


def check_anthropic_grammar(text: str, pings: int, kept: bool) -> None:
    """The client's stream, read as the Anthropic wire defines it: each event named as its
    data's type; one message_start first, the upstream's pings, blocks numbered from 0 and
    each started and stopped, one message_delta (ending as the kept calls say), and one
    message_stop last."""
    names, docs = [], []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        names.append(lines["event"])
        docs.append(json.loads(lines["data"]))
    assert names == [d["type"] for d in docs], names
    real = [n for n in names if n != "ping"]  # pings are relayed where the upstream sent them
    assert real[0] == "message_start" and names[-1] == "message_stop", names
    assert names.count("message_start") == names.count("message_stop") == 1
    assert names.count("ping") == pings, names
    assert names.count("message_delta") == 1
    delta = docs[names.index("message_delta")]["delta"]
    assert delta["stop_reason"] == ("tool_use" if kept else "end_turn"), delta
    starts = [d["index"] for d in docs if d["type"] == "content_block_start"]
    stops = [d["index"] for d in docs if d["type"] == "content_block_stop"]
    assert starts == stops == list(range(len(starts))), (starts, stops)
    for d in docs:
        if d["type"] == "content_block_delta":
            assert d["index"] in starts, d


async def _post(wire: str, stream: bool) -> httpx.Response:
    doc: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "go"}]}
    doc["stream"] = stream
    if wire == "anthropic":
        doc["max_tokens"] = 8
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=_APP), base_url="http://gw"
    ) as c:
        return await c.post(PATHS[wire], json=doc, headers={"x-trace-id": fresh_trace("malformed")})


def _uses(wire: str, text: str) -> list[str]:
    """The tool names the client received in a stream."""
    names = []
    for line in text.splitlines():
        if not line.startswith("data: {"):
            continue
        e = json.loads(line[6:])
        if wire == "anthropic":
            if e.get("type") == "content_block_start" and e["content_block"]["type"] == "tool_use":
                names.append(e["content_block"]["name"])
            continue
        for ch in e.get("choices", []):
            for tc in ch["delta"].get("tool_calls") or []:
                if tc.get("function", {}).get("name"):
                    names.append(tc["function"]["name"])
            if ch["delta"].get("function_call", {}).get("name"):
                names.append(ch["delta"]["function_call"]["name"])
    return names


@pytest.mark.fak_theorem("D10.5")
@pytest.mark.parametrize(
    ("name", "wire", "events", "status", "says"), STREAMS, ids=[s[0] for s in STREAMS]
)
def test_a_stream_the_gateway_cannot_read_is_an_error_and_no_call(
    name: str, wire: str, events: list[Any], status: int | None, says: str
) -> None:
    _RAW.update(body=_sse(events), media="text/event-stream")
    r = asyncio.run(_post(wire, True))
    if status is not None:
        assert r.status_code == status, (name, r.status_code, r.text[:300])
        assert says in r.text, (name, r.text[:300])
        assert r.headers["content-type"].startswith("application/json")  # an error, no stream
        assert "error" in r.json()
        return
    assert r.status_code == 200, r.text[:300]
    assert _uses(wire, r.text) == [], (name, r.text[:500])
    last = [ln for ln in r.text.splitlines() if ln.startswith("data: ")][-1]
    assert says in last, (name, last)  # the stream ends with this wire's error event


@pytest.mark.fak_theorem("D10.5")
@pytest.mark.parametrize(("name", "wire", "events", "names"), GOOD, ids=[g[0] for g in GOOD])
def test_a_well_formed_stream_is_relayed_with_its_kept_calls(
    name: str, wire: str, events: list[Any], names: list[str]
) -> None:
    _RAW.update(body=_sse(events), media="text/event-stream")
    r = asyncio.run(_post(wire, True))
    assert r.status_code == 200, r.text[:300]
    assert _uses(wire, r.text) == names, (name, r.text[:800])
    if wire == "openai" and name == "openai-no-object":
        # the gateway's own frames name their object even when the upstream's do not
        ours = [
            json.loads(ln[6:])
            for ln in r.text.splitlines()
            if ln.startswith("data: {") and ('"fak"' in ln or '"finish_reason":"stop"' in ln)
        ]
        assert ours and all(c["object"] == "chat.completion.chunk" for c in ours), ours
        return
    if wire == "openai":
        assert '"usage"' in r.text or "usage" not in json.dumps(events)
        chunks = check_openai_grammar(r.text, names, choices=name != "openai-only-done")
        records = next(c["fak"] for c in chunks if "fak" in c)["adjudications"]
        if name == "openai-only-done":
            assert chunks[0]["id"] == "chatcmpl-fak"
        if name == "openai-call-without-id":
            assert [a["tool_call_id"] for a in records] == ["call_fak_0_0"]
        if name == "openai-usage-and-done":  # the upstream's own id; the text relayed once
            assert [a["tool_call_id"] for a in records] == ["call_0"]
            content = "".join(
                ch["delta"].get("content") or "" for c in chunks for ch in c["choices"]
            )
            assert content == "hi", content
            # the gateway's own frames (the finish, the record) carry no usage of the upstream's
            ours = [
                c for c in chunks if "fak" in c or any(ch["finish_reason"] for ch in c["choices"])
            ]
            assert ours and not any("usage" in c for c in ours), ours
            # every usage the upstream sent reaches the client, the one on a content chunk
            # too, in order, each in a frame of its own
            usages = [c["usage"] for c in chunks if c.get("usage") is not None]
            assert usages == [{"total_tokens": 99}, {"total_tokens": 3}], usages
        if name == "openai-call-without-name":
            assert [(a["tool"], a["verdict"]["reason"]) for a in records] == [("", "MALFORMED")]
    else:
        assert "vendor_x" not in r.text
        upstream_pings = [e for e in events if isinstance(e, dict) and e.get("type") == "ping"]
        check_anthropic_grammar(r.text, len(upstream_pings), bool(names))
        if name == "whole-input":
            assert "pw" not in r.text and "password" not in r.text, r.text
            starts = [
                json.loads(ln[6:])
                for ln in r.text.splitlines()
                if ln.startswith("data: {") and '"content_block_start"' in ln
            ]
            assert starts[0]["content_block"]["input"] == {}, starts
            deltas = "".join(
                json.loads(ln[6:])["delta"].get("partial_json", "")
                for ln in r.text.splitlines()
                if ln.startswith("data: {") and '"content_block_delta"' in ln
            )
            assert json.loads(deltas) == {"id": 1}, deltas


#: Buffered documents: (name, wire, document, status, phrase)
DOCS: list[tuple[str, str, Any, int, str]] = [
    ("no-choices", "openai", {"id": "c", "object": "chat.completion"}, 502, "no choices array"),
    (
        "choice-without-message",
        "openai",
        {"choices": [{"index": 0}]},
        502,
        "choices[0] has no message object",
    ),
    ("choice-not-object", "openai", {"choices": [3]}, 502, "choices[0] has no message object"),
    (
        "finish-without-call",
        "openai",
        {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "x"},
                    "finish_reason": "tool_calls",
                }
            ]
        },
        502,
        "finish_reason is tool_calls but no tool call was sent",
    ),
    (
        "function-finish-without-call",
        "openai",
        {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "x"},
                    "finish_reason": "function_call",
                }
            ]
        },
        502,
        "finish_reason is tool_calls but no tool call was sent",
    ),
    (
        "no-content",
        "anthropic",
        {**START["message"], "content": None},
        502,
        "upstream message has no content array",
    ),
    (
        "error-object",
        "anthropic",
        {"type": "error", "error": {"type": "api_error", "message": "x"}},
        502,
        "upstream returned an error object",
    ),
    (
        "stop-without-use",
        "anthropic",
        {**START["message"], "content": [{"type": "text", "text": "x"}], "stop_reason": "tool_use"},
        502,
        "stop_reason is tool_use but no tool_use block was sent",
    ),
]


@pytest.mark.fak_theorem("D10.5")
@pytest.mark.parametrize(("name", "wire", "doc", "status", "says"), DOCS, ids=[d[0] for d in DOCS])
def test_a_document_the_gateway_cannot_read_is_an_error(
    name: str, wire: str, doc: Any, status: int, says: str
) -> None:
    _RAW.update(body=json.dumps(doc).encode(), media="application/json")
    r = asyncio.run(_post(wire, False))
    assert r.status_code == status, (name, r.status_code, r.text[:300])
    assert says in r.text, (name, r.text[:300])


def _message(content: list[Any], stop: str) -> dict[str, Any]:
    return {**START["message"], "content": content, "stop_reason": stop}


@pytest.mark.fak_theorem("D10.5")
def test_a_document_ends_as_its_kept_calls_say_and_keeps_its_choice_numbers() -> None:
    use = {"type": "tool_use", "id": "toolu_0", "name": "get_user", "input": {"id": 1}}
    _RAW.update(body=json.dumps(_message([use], "end_turn")).encode(), media="application/json")
    r = asyncio.run(_post("anthropic", False))
    assert r.status_code == 200 and r.json()["stop_reason"] == "tool_use", r.text[:300]
    fn = {"name": "get_user", "arguments": '{"id": 1}'}
    choices = [
        {
            "index": i,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"call_{i}", "type": "function", "function": fn}],
            },
            "finish_reason": "tool_calls",
        }
        for i in (1, 0)  # the upstream's own numbering, not its order
    ]
    _RAW.update(body=json.dumps({"id": "c", "choices": choices}).encode(), media="application/json")
    r = asyncio.run(_post("openai", False))
    assert r.status_code == 200, r.text[:300]
    records = r.json()["fak"]["adjudications"]
    assert [(a["tool_call_id"], a["choice"]) for a in records] == [("call_1", 1), ("call_0", 0)]


@pytest.mark.fak_theorem("D10.5")
@pytest.mark.parametrize("stream", [False, True])
def test_a_provider_result_of_a_nameless_use_is_admitted_under_its_block_type(
    stream: bool,
) -> None:
    use = {"type": "server_tool_use", "id": "srvtoolu_0", "name": "", "input": {}}
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_0", "content": []}
    if stream:
        events = [START]
        for i, block in enumerate((use, result)):
            events += [
                {"type": "content_block_start", "index": i, "content_block": block},
                {"type": "content_block_stop", "index": i},
            ]
        _RAW.update(body=_sse([*events, *_end()]), media="text/event-stream")
    else:
        body = json.dumps(_message([use, result], "end_turn")).encode()
        _RAW.update(body=body, media="application/json")
    r = asyncio.run(_post("anthropic", stream))
    assert r.status_code == 200, r.text[:300]
    fak = (
        next(
            json.loads(ln[6:])["fak"]
            for ln in r.text.splitlines()
            if ln.startswith("data: {") and '"fak"' in ln
        )
        if stream
        else r.json()["fak"]
    )
    records = fak["provider_result_admissions"]
    assert [(x["tool_call_id"], x["tool"]) for x in records] == [
        ("srvtoolu_0", "web_search_tool_result")
    ]
