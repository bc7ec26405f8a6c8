"""D10.5: an answer the gateway cannot read whole is an error, on every rule of each wire.

The raw upstream (in process) of ``test_malformed_upstream`` answers with a well-formed
turn broken in exactly one place: each way a streamed OpenAI choice, delta, tool-call
fragment or legacy ``function_call`` can be mistyped (or arrive after its choice
finished), each way an Anthropic block or a tool use's delta can be, and the buffered
documents' counterparts. Each stream is sent twice: with text before the break (the
client has bytes already, so the stream must end with this wire's error event) and
without (an HTTP 502 before any event). The oracle is the wire's own error shape (the
status, or the last event) and that no tool use reached the client; it is written here,
from the wire specs, not from the gateway's messages.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from .test_malformed_upstream import _RAW, ARGS, START, _post
from .test_malformed_upstream import CALL as FRAG

# ----------------------------------------------------------------------------- OpenAI


def _choice(delta: Any, finish: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "finish_reason": finish}


def _chunk(choices: Any) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": choices,
    }


def _tc(*frags: Any) -> dict[str, Any]:
    return _chunk([_choice({"tool_calls": list(frags)})])


FINISH = _chunk([_choice({}, "tool_calls")])
STOP = _chunk([_choice({}, "stop")])

#: (name, the chunks of the break: a finish and ``[DONE]`` follow unless it has its own)
OPENAI_STREAMS: list[tuple[str, list[Any]]] = [
    ("fragment-not-object", [_tc(FRAG, ARGS), _tc(3)]),
    ("fragment-index-text", [_tc({**FRAG, "index": "0"}, ARGS)]),
    ("fragment-index-boolean", [_tc({**FRAG, "index": True}, ARGS)]),
    ("fragment-without-index", [_tc({k: v for k, v in FRAG.items() if k != "index"})]),
    ("fragment-type-custom", [_tc({**FRAG, "type": "custom"}, ARGS)]),
    ("fragment-function-not-object", [_tc({**FRAG, "function": "get_user()"})]),
    ("fragment-name-not-text", [_tc({**FRAG, "function": {"name": 5}}, ARGS)]),
    ("fragment-arguments-not-text", [_tc(FRAG, {"index": 0, "function": {"arguments": {}}})]),
    ("tool-calls-not-array", [_chunk([_choice({"tool_calls": FRAG})])]),
    ("tool-calls-a-number", [_chunk([_choice({"tool_calls": 5})])]),
    ("function-call-not-object", [_chunk([_choice({"function_call": "get_user()"})])]),
    ("function-call-name-not-text", [_chunk([_choice({"function_call": {"name": 5}})])]),
    (
        "function-call-arguments-not-text",
        [_chunk([_choice({"function_call": {"name": "get_user", "arguments": {}}})])],
    ),
    ("choice-not-object", [_chunk([3])]),
    ("choices-not-array", [_chunk({"index": 0, "delta": {"content": "x"}})]),
    ("choices-a-number", [_chunk(5)]),
    ("choice-index-text", [_chunk([{**_choice({"content": "x"}), "index": "0"}])]),
    ("delta-not-object", [_chunk([_choice("x")])]),
    ("call-after-finish", [STOP, _tc(FRAG, ARGS), FINISH]),
    (
        "function-call-after-finish",
        [STOP, _chunk([_choice({"function_call": {"name": "get_user", "arguments": "{}"}})])],
    ),
    ("text-after-finish", [STOP, _chunk([_choice({"content": "late"})])]),
    ("event-not-json", ["{bad"]),
    ("event-an-array", ["[1, 2]"]),
    ("event-too-deep", ["[" * 200 + "]" * 200]),
]

TEXT = _chunk([_choice({"role": "assistant", "content": "hi"})])


def _openai_stream(chunks: list[Any], text_first: bool) -> bytes:
    body = [TEXT] if text_first else []
    body += chunks
    if not any(c is FINISH or c is STOP for c in chunks):
        body.append(FINISH)
    return b"".join(
        b"data: " + (c if isinstance(c, str) else json.dumps(c)).encode() + b"\n\n" for c in body
    ) + (b"data: [DONE]\n\n")


def _openai_uses(text: str) -> list[Any]:
    uses = []
    for line in text.splitlines():
        if line.startswith("data: {"):
            for ch in json.loads(line[6:]).get("choices") or []:
                delta = ch.get("delta") or {}
                uses += delta.get("tool_calls") or []
                uses += [delta["function_call"]] if delta.get("function_call") else []
    return uses


MALFORMED = ("upstream_malformed", "upstream_tool_format")


def check_error(
    r: httpx.Response, text_first: bool, wire: str, codes: tuple[str, ...] = MALFORMED
) -> None:
    """The break is an error in the wire's shape: a 502 before any event, else the
    stream's last event; and no tool use reached the client."""
    if not text_first:
        assert r.status_code == 502, (r.status_code, r.text[:300])
        assert r.headers["content-type"].startswith("application/json"), r.headers
        doc = r.json()
        if wire == "openai":
            assert doc["error"]["code"] in codes, doc
        else:
            assert doc["type"] == "error" and doc["error"]["type"] == "api_error", doc
        return
    assert r.status_code == 200, (r.status_code, r.text[:300])
    events = [ln for ln in r.text.splitlines() if ln.startswith("data: ")]
    last = json.loads(events[-1][6:])
    if wire == "openai":
        assert last["error"]["code"] in codes, last
        assert _openai_uses(r.text) == [], r.text[:800]
    else:
        assert last["type"] == "error" and last["error"]["type"] == "api_error", last
        starts = [
            json.loads(ln[6:])["content_block"] for ln in events if '"content_block_start"' in ln
        ]
        assert [b["type"] for b in starts] == ["text"], starts


@pytest.mark.fak_theorem("D10.5")
@pytest.mark.parametrize("text_first", [False, True])
@pytest.mark.parametrize(("name", "chunks"), OPENAI_STREAMS, ids=[c[0] for c in OPENAI_STREAMS])
def test_a_broken_openai_stream_is_an_error_and_no_call(
    name: str, chunks: list[Any], text_first: bool
) -> None:
    _RAW.update(body=_openai_stream(chunks, text_first), media="text/event-stream")
    check_error(asyncio.run(_post("openai", True)), text_first, "openai")


CALL = {"id": "call_0", "type": "function", "function": {"name": "get_user", "arguments": "{}"}}

#: (name, the assistant message's proposal fields)
OPENAI_DOCS: list[tuple[str, dict[str, Any]]] = [
    ("tool-calls-not-array", {"tool_calls": CALL}),
    ("tool-calls-a-number", {"tool_calls": 5}),
    ("tool-call-type-unknown", {"tool_calls": [{**CALL, "type": "retrieval"}]}),
    ("tool-call-type-not-text", {"tool_calls": [{**CALL, "type": 5}]}),
    ("tool-call-not-object", {"tool_calls": [CALL, 3]}),
    ("tool-call-body-not-object", {"tool_calls": [{**CALL, "function": "get_user()"}]}),
    ("function-call-not-object", {"function_call": "get_user()"}),
    (
        "both-forms",
        {"function_call": {"name": "get_user", "arguments": "{}"}, "tool_calls": [CALL]},
    ),
]


@pytest.mark.fak_theorem("D10.5")
@pytest.mark.parametrize(("name", "fields"), OPENAI_DOCS, ids=[d[0] for d in OPENAI_DOCS])
def test_a_broken_openai_document_is_an_error(name: str, fields: dict[str, Any]) -> None:
    message = {"role": "assistant", "content": "hi", **fields}
    doc = {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }
    _RAW.update(body=json.dumps(doc).encode(), media="application/json")
    check_error(asyncio.run(_post("openai", False)), False, "openai")


# ----------------------------------------------------------------------------- Anthropic
USE = {"type": "tool_use", "id": "toolu_0", "name": "get_user", "input": {}}
RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_0", "content": []}
END = [
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
    {"type": "message_stop"},
]


def _start(i: int, block: Any) -> dict[str, Any]:
    return {"type": "content_block_start", "index": i, "content_block": block}


def _delta(i: int, delta: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": i, "delta": delta}


def _stop(i: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": i}


JSON = {"type": "input_json_delta", "partial_json": '{"id": 1}'}

#: (name, the events of the break, at block indexes from 1)
ANTHROPIC_STREAMS: list[tuple[str, list[Any]]] = [
    ("block-not-object", [_start(1, 3), _stop(1)]),
    ("block-type-not-text", [_start(1, {**USE, "type": 5}), _stop(1)]),
    ("block-type-unknown", [_start(1, {**USE, "type": "vendor_tool_use"}), _stop(1)]),
    ("use-id-empty", [_start(1, {**USE, "id": ""}), _delta(1, JSON), _stop(1)]),
    ("use-id-not-text", [_start(1, {**USE, "id": 5}), _delta(1, JSON), _stop(1)]),
    ("use-without-id", [_start(1, {k: v for k, v in USE.items() if k != "id"}), _stop(1)]),
    ("result-with-delta", [_start(1, RESULT), _delta(1, JSON), _stop(1)]),
    ("use-delta-not-object", [_start(1, USE), _delta(1, "x"), _stop(1)]),
    (
        "use-delta-of-text",
        [_start(1, USE), _delta(1, {"type": "text_delta", "partial_json": "{}"}), _stop(1)],
    ),
    (
        "use-delta-not-text",
        [_start(1, USE), _delta(1, {"type": "input_json_delta", "partial_json": 5}), _stop(1)],
    ),
    ("use-delta-after-stop", [_start(1, USE), _stop(1), _delta(1, JSON), _stop(1)]),
    ("event-not-json", ["{bad"]),
    ("event-an-array", ["[1, 2]"]),
    ("event-too-deep", ["[" * 200 + "]" * 200]),
]


def _anthropic_stream(events: list[Any], text_first: bool) -> bytes:
    body = [START]
    if text_first:
        body += [
            _start(0, {"type": "text", "text": ""}),
            _delta(0, {"type": "text_delta", "text": "hi"}),
            _stop(0),
        ]
    body += [*events, *END]
    return "".join(
        f"event: x\ndata: {e}\n\n"
        if isinstance(e, str)
        else f"event: {e['type']}\ndata: {json.dumps(e)}\n\n"
        for e in body
    ).encode()


@pytest.mark.fak_theorem("D10.5")
@pytest.mark.parametrize("text_first", [False, True])
@pytest.mark.parametrize(
    ("name", "events"), ANTHROPIC_STREAMS, ids=[c[0] for c in ANTHROPIC_STREAMS]
)
def test_a_broken_anthropic_stream_is_an_error_and_no_use(
    name: str, events: list[Any], text_first: bool
) -> None:
    _RAW.update(body=_anthropic_stream(events, text_first), media="text/event-stream")
    check_error(asyncio.run(_post("anthropic", True)), text_first, "anthropic")


#: (name, the answer's content after a text block)
ANTHROPIC_DOCS: list[tuple[str, list[Any]]] = [
    ("block-not-object", [3]),
    ("block-type-not-text", [{**USE, "type": 5}]),
    ("block-type-unknown", [{**USE, "type": "vendor_tool_use"}]),
    ("use-id-empty", [{**USE, "id": ""}]),
    ("use-id-not-text", [{**USE, "id": 5}]),
    ("use-without-id", [{k: v for k, v in USE.items() if k != "id"}]),
]


@pytest.mark.fak_theorem("D10.5")
@pytest.mark.parametrize(("name", "content"), ANTHROPIC_DOCS, ids=[d[0] for d in ANTHROPIC_DOCS])
def test_a_broken_anthropic_document_is_an_error(name: str, content: list[Any]) -> None:
    doc = {
        **START["message"],
        "content": [{"type": "text", "text": "hi"}, *content],
        "stop_reason": "tool_use",
    }
    _RAW.update(body=json.dumps(doc).encode(), media="application/json")
    check_error(asyncio.run(_post("anthropic", False)), False, "anthropic")


@pytest.mark.fak_theorem("D10.5")
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_stream_cut_mid_call_is_an_error_and_no_call(wire: str) -> None:
    """The connection breaks after a tool use began: the transport's failure is the wire's
    error (in process the upstream's body arrives whole, so before any event), no use."""
    if wire == "openai":
        events = [TEXT, _tc(FRAG, ARGS)]
        body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in events)
    else:
        events = [START, _start(0, USE), _delta(0, JSON)]
        body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    _RAW.update(body=body, media="text/event-stream", cut=True)
    try:
        r = asyncio.run(_post(wire, True))
    finally:
        _RAW["cut"] = False
    assert r.status_code == 502, (r.status_code, r.text[:300])
    doc = r.json()
    if wire == "openai":
        assert doc["error"]["code"] == "upstream_error", doc
    else:
        assert doc["type"] == "error" and doc["error"]["type"] == "api_error", doc
