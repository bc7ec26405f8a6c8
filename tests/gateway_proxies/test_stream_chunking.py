"""D10.2, D10.5 on a stream in any chunking: no refused call's arguments reach the client.

A raw upstream (in process) streams tool calls the way the providers' streaming specs
allow: OpenAI function-call fragments (the first with the call's index, id, type and
name; each later one an index and a piece of the arguments text) split at any number of
drawn places and interleaved across parallel calls, several fragments in one chunk or
not; Anthropic ``tool_use`` blocks one after the other, each input sent as
``input_json_delta`` pieces split at drawn places. The stream's bytes then reach the
gateway in pieces cut at drawn byte offsets (one byte at a time in an explicit example),
so an event, its ``data:`` prefix, its blank line and a UTF-8 character can all arrive
split.

The oracle is written here from how each call was built: the names the test kernel allows
(``get_user``, ``fetch_url``) are kept with their arguments as sent, in proposal order, and
every other name (denied, unknown, held) is dropped; each call's arguments carry a marker of
its own, and no refused call's marker may appear anywhere in what the client receives.
Every frame the client receives is parsed with the SDKs' own stream event types.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from anthropic.types import RawMessageStreamEvent
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from fak_core.gateway import UpstreamConfig, proxy_routes

from .inprocess import post_turn
from .kernels import make_state
from .test_malformed_upstream import START

KEPT_NAMES = ("get_user", "fetch_url")
REFUSED_NAMES = ("deny_thing", "frobnicate", "hold_thing", "wire_money")
_PIECES: dict[str, list[bytes]] = {"body": []}


async def _answer(request: Request) -> Response:
    pieces = list(_PIECES["body"])

    async def gen() -> Any:
        for piece in pieces:
            yield piece

    return StreamingResponse(gen(), media_type="text/event-stream")


_UP = Starlette(
    routes=[
        Route("/v1/chat/completions", _answer, methods=["POST"]),
        Route("/v1/messages", _answer, methods=["POST"]),
    ]
)
_STATE = make_state()
_APP = Starlette(
    routes=proxy_routes(
        _STATE, UpstreamConfig(base_url="http://up/v1", transport=httpx.ASGITransport(app=_UP))
    )
)
_EVENTS: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)


@dataclass(frozen=True)
class Call:
    name: str
    marker: str
    #: the arguments text split at these character offsets (sorted, deduplicated)
    cuts: tuple[int, ...]
    #: the arguments text written with ``\\uXXXX`` escapes (a cut may fall inside one)
    ascii: bool = False

    @property
    def kept(self) -> bool:
        return self.name in KEPT_NAMES

    @property
    def args(self) -> dict[str, Any]:
        return {"note": self.marker, "n": [1, {"é": '✓\n"q\\'}]}

    @property
    def text(self) -> str:
        return json.dumps(self.args, ensure_ascii=self.ascii)

    def pieces(self) -> list[str]:
        text, cuts = self.text, sorted({c % (len(self.text) + 1) for c in self.cuts})
        bounds = [0, *cuts, len(text)]
        return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def calls() -> st.SearchStrategy[list[Call]]:
    one = st.tuples(
        st.sampled_from(KEPT_NAMES + REFUSED_NAMES),
        st.lists(st.integers(0, 90), max_size=6).map(tuple),
        st.booleans(),
    )
    return st.lists(one, min_size=1, max_size=4).map(
        lambda xs: [
            Call(n, f"mark{i}q{'K' if n in KEPT_NAMES else 'R'}", c, a)
            for i, (n, c, a) in enumerate(xs)
        ]
    )


# ------------------------------------------------------------------ the upstream's streams
def _sse(data: Any, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    doc = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return _sse({**doc, "choices": [choice]})


def openai_stream(
    proposed: list[Call], order: list[int], share: bool, words: tuple[str, ...] = ()
) -> bytes:
    """Each call's fragments in its own order; ``order`` picks which call speaks next;
    the text ``words`` go one before each of the first fragments, the rest after them."""
    queues: list[list[dict[str, Any]]] = []
    for i, c in enumerate(proposed):
        pieces = c.pieces()
        first = {
            "index": i,
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": c.name, "arguments": pieces[0]},
        }
        queues.append([first, *({"index": i, "function": {"arguments": p}} for p in pieces[1:])])
    frames = [_chunk({"role": "assistant", "content": ""})]
    pending: list[dict[str, Any]] = []
    turn = 0
    while any(queues):
        if turn < len(words):
            frames.append(_chunk({"content": words[turn]}))
        who = order[turn % len(order)] % len(queues) if order else 0
        turn += 1
        live = [q for q in queues if q]
        q = queues[who] if queues[who] else live[0]
        pending.append(q.pop(0))
        if not share or len(pending) == 2:
            frames.append(_chunk({"tool_calls": pending}))
            pending = []
    if pending:
        frames.append(_chunk({"tool_calls": pending}))
    frames.extend(_chunk({"content": w}) for w in words[turn:])  # the words left over
    frames.append(_chunk({}, "tool_calls"))
    frames.append(_sse("[DONE]"))
    return b"".join(frames)


def anthropic_stream(proposed: list[Call], words: tuple[str, ...] = ()) -> bytes:
    """A text block of ``words`` (when there are any), then each call's ``tool_use``."""
    message: dict[str, Any] = {**START["message"], "stop_sequence": None}
    frames = [_sse({"type": "message_start", "message": message}, "message_start")]
    first = 0
    if words:
        first = 1
        text = {"type": "text", "text": ""}
        frames.append(
            _sse(
                {"type": "content_block_start", "index": 0, "content_block": text},
                "content_block_start",
            )
        )
        for w in words:
            delta = {"type": "text_delta", "text": w}
            frames.append(
                _sse(
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                    "content_block_delta",
                )
            )
        frames.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    for pos, c in enumerate(proposed):
        i = first + pos
        block = {"type": "tool_use", "id": f"toolu_{pos}", "name": c.name, "input": {}}
        start = {"type": "content_block_start", "index": i, "content_block": block}
        frames.append(_sse(start, "content_block_start"))
        for p in c.pieces():
            delta = {"type": "input_json_delta", "partial_json": p}
            frames.append(
                _sse(
                    {"type": "content_block_delta", "index": i, "delta": delta},
                    "content_block_delta",
                )
            )
        frames.append(_sse({"type": "content_block_stop", "index": i}, "content_block_stop"))
    end = {"stop_reason": "tool_use", "stop_sequence": None}
    frames.append(
        _sse({"type": "message_delta", "delta": end, "usage": message["usage"]}, "message_delta")
    )
    frames.append(_sse({"type": "message_stop"}, "message_stop"))
    return b"".join(frames)


def _cut(body: bytes, offsets: list[int]) -> list[bytes]:
    """``body`` cut at each offset (0 < offset < len): the transport's pieces."""
    bounds = [0, *sorted({o for o in offsets if 0 < o < len(body)}), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(bounds)]


# ------------------------------------------------------------------ what the client reads
def _events(text: str) -> list[tuple[str, str]]:
    out = []
    for block in text.split("\n\n"):
        name, data = "", []
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            out.append((name, "\n".join(data)))
    return out


Read = tuple[list[tuple[str, str, Any]], str | None, str]


def openai_calls(text: str) -> Read:
    """What the client assembles from the stream: the calls (id, name, arguments), the
    finish reason and the text."""
    frames = _events(text)
    assert frames[-1][1] == "[DONE]", frames[-3:]
    got: dict[int, dict[str, Any]] = {}
    finish, said = None, ""
    for _, data in frames[:-1]:
        chunk = json.loads(data)
        ChatCompletionChunk.model_validate(chunk)
        for choice in chunk["choices"]:
            finish = choice.get("finish_reason") or finish
            said += choice["delta"].get("content") or ""
            for frag in choice["delta"].get("tool_calls") or []:
                slot = got.setdefault(frag["index"], {"id": "", "name": "", "args": ""})
                slot["id"] += frag.get("id") or ""
                fn = frag.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["args"] += fn.get("arguments") or ""
    calls = [(s["id"], s["name"], json.loads(s["args"])) for _, s in sorted(got.items())]
    return calls, finish, said


def anthropic_calls(text: str) -> Read:
    frames = _events(text)
    blocks: dict[int, dict[str, Any]] = {}
    stop, said = None, ""
    for name, data in frames:
        event = json.loads(data)
        assert event["type"] == name
        _EVENTS.validate_python(event)
        if name == "content_block_start" and event["content_block"]["type"] == "tool_use":
            b = event["content_block"]
            blocks[event["index"]] = {"id": b["id"], "name": b["name"], "args": ""}
        elif name == "content_block_delta" and event["delta"]["type"] == "input_json_delta":
            blocks[event["index"]]["args"] += event["delta"]["partial_json"]
        elif name == "content_block_delta" and event["delta"]["type"] == "text_delta":
            said += event["delta"]["text"]
        elif name == "message_delta":
            stop = event["delta"].get("stop_reason")
    assert frames and frames[-1][0] == "message_stop", frames[-2:]
    calls = [(b["id"], b["name"], json.loads(b["args"] or "{}")) for _, b in sorted(blocks.items())]
    return calls, stop, said


async def _turn(wire: str) -> httpx.Response:
    doc: dict[str, Any] = {
        "model": "m",
        "stream": True,
        "messages": [{"role": "user", "content": "go"}],
    }
    return await post_turn(_APP, wire, doc)


def check(
    wire: str,
    proposed: list[Call],
    order: list[int],
    share: bool,
    offsets: list[int],
    words: tuple[str, ...] = (),
) -> None:
    if wire == "openai":
        body = openai_stream(proposed, order, share, words)
    else:
        body = anthropic_stream(proposed, words)
    _PIECES["body"] = _cut(body, offsets)
    r = asyncio.run(_turn(wire))
    assert r.status_code == 200, r.text
    for c in proposed:
        if not c.kept:
            assert c.marker not in r.text, (c, r.text)
    got, finish, said = (openai_calls if wire == "openai" else anthropic_calls)(r.text)
    kept = [(i, c) for i, c in enumerate(proposed) if c.kept]
    prefix = "call_" if wire == "openai" else "toolu_"
    assert got == [(f"{prefix}{i}", c.name, c.args) for i, c in kept], (got, proposed)
    ended = ("tool_calls", "tool_use") if kept else ("stop", "end_turn")
    assert finish == ended[0 if wire == "openai" else 1]
    assert said.startswith("".join(words)), (said, words)  # the text, as the upstream wrote it


def _budget(prop: Any) -> None:
    settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])(prop)()


PARALLEL = [
    Call("get_user", "mark0qK", (3, 9, 17), True),
    Call("deny_thing", "mark1qR", (1, 2, 5, 30)),
    Call("fetch_url", "mark2qK", (0, 44, 45, 46)),
    Call("frobnicate", "mark3qR", (7,), True),
]
WORDS = ("Let me ", "look ✓ ", "that up.")


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.fak_theorem("D10.2", "D10.5")
def test_a_refused_calls_deltas_never_reach_the_client_in_any_chunking(wire: str) -> None:
    def prop(
        proposed: list[Call],
        order: list[int],
        share: bool,
        offsets: list[int],
        words: tuple[str, ...],
    ) -> None:
        check(wire, proposed, order, share, offsets, words)

    whole = (
        openai_stream(PARALLEL, [1, 0, 3, 2], True, WORDS)
        if wire == "openai"
        else anthropic_stream(PARALLEL, WORDS)
    )
    every_byte = list(range(1, len(whole)))
    explicit = given(
        proposed=calls(),
        order=st.lists(st.integers(0, 3), max_size=12),
        share=st.booleans(),
        offsets=st.lists(st.integers(1, 4000), max_size=24),
        words=st.lists(st.text("ab ✓é", min_size=1, max_size=4), max_size=3).map(tuple),
    )(prop)
    explicit = example(PARALLEL, [1, 0, 3, 2], True, every_byte, WORDS)(explicit)
    explicit = example(PARALLEL[1::2], [], False, [], ())(explicit)
    _budget(explicit)
