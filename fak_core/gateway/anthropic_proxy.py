"""``POST /v1/messages``: the Anthropic-compatible proxy, kernel-adjudicated.

Every ``tool_result`` block in the user turns is admitted on the session's trace before
the model runs (a quarantine rewrites the block the model sees; taint rises). Every
``tool_use`` block the model proposes is adjudicated in order; only ALLOW (verbatim) and
TRANSFORM (repaired ``input``) survive. Streaming relays text and thinking blocks as they
arrive (re-indexed) and holds ``tool_use`` blocks until the message is complete and
adjudicated. Errors use Anthropic's own shape, ``{"type":"error","error":{type,message}}``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.responses import JSONResponse, Response

from fak_core.gateway.mcp_content import base64_text
from fak_core.gateway.proxy_io import (
    durable_stream,
    event_json,
    sse_event,
    upstream_events,
)
from fak_core.gateway.state import WireError
from fak_core.gateway.turn import (
    Adjudication,
    InboundResult,
    ProposedCall,
    TurnOutcome,
    adjudicate_proposed,
    refusal_summary,
)
from fak_core.gateway.upstream import UpstreamError
from fak_core.gateway.wire_proxy import (
    WireProxy,
    require_messages,
    require_model,
    tool_format_error,
)
from fak_core.jsondepth import dumps

__all__ = ["AnthropicProxy", "anthropic_error", "anthropic_error_type", "validate_messages_request"]

_UPSTREAM_ERROR_STATUS = {
    "overloaded_error": 503,
    "rate_limit_error": 429,
    "api_error": 502,
    "timeout_error": 504,
}


def anthropic_error_type(status: int) -> str:
    """Anthropic's error ``type`` for an HTTP status."""
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        503: "overloaded_error",
        529: "overloaded_error",
        504: "timeout_error",
    }.get(status, "api_error" if status >= 500 else "invalid_request_error")


def anthropic_error_body(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": anthropic_error_type(status), "message": message}}


def anthropic_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """An error response in Anthropic's shape."""
    return JSONResponse(anthropic_error_body(status, message), status_code=status, headers=headers)


def _fmt(reason: str) -> UpstreamError:
    return tool_format_error("tool_use", reason)


def validate_messages_request(doc: dict[str, Any]) -> None:
    """Refuse a request the proxy cannot forward faithfully, naming the field to fix."""
    require_model(doc)
    max_tokens = doc.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise WireError("max_tokens: field required (an integer >= 1)", "max_tokens")
    for i, m in enumerate(require_messages(doc)):
        where = f"messages.{i}"
        if not isinstance(m, dict):
            raise WireError(f"{where}: must be an object", where)
        if m.get("role") not in ("user", "assistant"):
            raise WireError(f"{where}.role: must be 'user' or 'assistant'", where)
        content = m.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise WireError(f"{where}.content: must be a string or an array of blocks", where)
        for j, block in enumerate(content):
            bwhere = f"{where}.content.{j}"
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise WireError(f"{bwhere}: must be an object with a string 'type'", bwhere)
            if block["type"] == "tool_result":
                if not isinstance(block.get("tool_use_id"), str) or not block["tool_use_id"]:
                    raise WireError(f"{bwhere}.tool_use_id: required for tool_result", bwhere)
                c = block.get("content")
                if c is not None and not isinstance(c, str | list):
                    raise WireError(f"{bwhere}.content: must be a string or an array", bwhere)
    stream = doc.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise WireError("stream: must be a boolean", "stream")
    if doc.get("tools") is not None and not isinstance(doc["tools"], list):
        raise WireError("tools: must be an array", "tools")
    system = doc.get("system")
    if system is not None and not isinstance(system, str | list):
        raise WireError("system: must be a string or an array of text blocks", "system")


def _result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        for b in content
    ):
        return "".join(b["text"] for b in content)
    text = dumps(content).decode("utf-8")
    # image and document blocks carry base64 data: screen what can be read in it too
    decoded = [
        base64_text(src["data"], mime if isinstance(mime := src.get("media_type"), str) else None)
        for b in content
        if isinstance(b, dict)
        and isinstance(src := b.get("source"), dict)
        and src.get("type") == "base64"
        and isinstance(src.get("data"), str)
    ]
    return "\n".join([text, *decoded]) if decoded else text


def inbound_results(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any], InboundResult]]:
    """Every ``tool_result`` block, named after the ``tool_use`` it answers when known."""
    names: dict[str, str] = {}
    out = []
    for m in messages:
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                names[block["id"]] = str(block.get("name") or "")
            elif block.get("type") == "tool_result" and m.get("role") == "user":
                tid = block["tool_use_id"]
                out.append(
                    (
                        block,
                        InboundResult(tid, names.get(tid, ""), _result_text(block.get("content"))),
                    )
                )
    return out


def _tool_input(value: Any) -> Any:
    """The input as the kernel sees it: an object as is; anything else as its JSON text,
    which rung 0 refuses (Anthropic ``input`` must be an object)."""
    return value if isinstance(value, dict) else dumps(value).decode("utf-8")


def _fak(trace: str, outcome: TurnOutcome, results: list[InboundResult]) -> dict[str, Any]:
    return {
        "trace_id": trace,
        "adjudications": [a.to_wire() for a in outcome.adjudications],
        "result_admissions": [r.to_wire() for r in results],
    }


def _kept_input(a: Adjudication, original: Any) -> Any:
    return orjson.loads(a.repaired) if a.repaired is not None else original


@dataclass
class _HeldTool:
    id: str
    name: Any
    start_input: Any
    parts: list[str] = field(default_factory=list)
    complete: bool = False

    def arguments(self) -> Any:
        if self.parts:
            text = "".join(self.parts)
            return text if text.strip() else "{}"
        return _tool_input(self.start_input if self.start_input is not None else {})


class AnthropicProxy(WireProxy):
    """The messages route bound to one gateway state and one upstream."""

    wire = "anthropic"
    wire_name = "Anthropic"
    other_route = "/v1/chat/completions"

    def error(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        return anthropic_error(status, message, headers)

    def error_frame(self, exc: UpstreamError) -> bytes:
        return sse_event("error", anthropic_error_body(exc.status, exc.message))

    def validate(self, doc: dict[str, Any]) -> None:
        validate_messages_request(doc)

    def inbound(self, doc: dict[str, Any]) -> list[tuple[dict[str, Any], InboundResult]]:
        return inbound_results(doc["messages"])

    # ------------------------------------------------------------------ non-streaming
    async def complete_turn(
        self, doc: dict[str, Any], trace: str, results: list[InboundResult]
    ) -> dict[str, Any]:
        if doc.get("type") == "error":
            raise UpstreamError(502, "upstream returned an error object", "upstream_error")
        content = doc.get("content")
        if not isinstance(content, list):
            raise UpstreamError(502, "upstream message has no content array", "upstream_malformed")
        proposed: list[ProposedCall] = []
        for i, block in enumerate(content):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise UpstreamError(
                    502, f"upstream content[{i}] is not a typed block", "upstream_malformed"
                )
            if block["type"] == "tool_use":
                if not isinstance(block.get("id"), str) or not block["id"]:
                    raise _fmt(f"content[{i}] has no id")
                proposed.append(
                    ProposedCall(block["id"], block.get("name"), _tool_input(block.get("input")))
                )
        if doc.get("stop_reason") == "tool_use" and not proposed:
            raise _fmt("stop_reason is tool_use but no tool_use block was sent")
        outcome = await adjudicate_proposed(self.state, proposed, trace)
        verdicts = iter(outcome.adjudications)
        new_content = []
        for block in content:
            if block["type"] != "tool_use":
                new_content.append(block)
                continue
            a = next(verdicts)
            if a.admitted:
                new_content.append({**block, "input": _kept_input(a, block.get("input"))})
        if outcome.kept:
            doc["stop_reason"] = "tool_use"
        elif outcome.dropped:
            new_content.append({"type": "text", "text": refusal_summary(outcome.dropped)})
            doc["stop_reason"] = "end_turn"
        doc["content"] = new_content
        doc["fak"] = _fak(trace, outcome, results)
        return doc

    # ------------------------------------------------------------------ streaming
    async def relay(
        self,
        body: bytes,
        client_headers: dict[str, str],
        trace: str,
        results: list[InboundResult],
    ) -> AsyncGenerator[bytes, None]:
        index_map: dict[int, int] = {}  # upstream block index -> client block index
        held: dict[int, _HeldTool] = {}
        order: list[_HeldTool] = []
        next_out = 0
        message_delta: dict[str, Any] | None = None
        started = False
        stopped = False
        # message_start and pings wait for the first relayed block, so a fault before any
        # content is still answered with an HTTP status rather than an in-stream error.
        pending: list[bytes] = []
        async with self.upstream.stream("anthropic", body, client_headers) as resp:
            async for event in upstream_events(resp):
                ev = event_json(event, "Anthropic")
                kind = ev.get("type", event.event)
                if kind == "error":
                    err_doc = ev.get("error")
                    err: dict[str, Any] = err_doc if isinstance(err_doc, dict) else {}
                    etype = str(err.get("type", "api_error"))
                    raise UpstreamError(
                        _UPSTREAM_ERROR_STATUS.get(etype, 502),
                        f"upstream stream error ({etype}): {err.get('message', '')}",
                        "upstream_error",
                    )
                if kind == "ping":
                    pending.append(sse_event("ping", ev))
                elif kind == "message_start":
                    msg = ev.get("message")
                    if not isinstance(msg, dict):
                        raise UpstreamError(
                            502, "message_start without a message", "upstream_malformed"
                        )
                    if any(
                        isinstance(b, dict) and b.get("type") == "tool_use"
                        for b in msg.get("content") or []
                    ):
                        raise _fmt("tool_use inside message_start")
                    started = True
                    pending.append(sse_event("message_start", ev))
                elif kind in ("content_block_start", "content_block_delta", "content_block_stop"):
                    if not started:
                        raise UpstreamError(
                            502, f"{kind} before message_start", "upstream_malformed"
                        )
                    idx = ev.get("index")
                    if not isinstance(idx, int) or isinstance(idx, bool):
                        raise UpstreamError(
                            502, f"{kind} without an integer index", "upstream_malformed"
                        )
                    if kind == "content_block_start":
                        block = ev.get("content_block")
                        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                            raise UpstreamError(
                                502, "content_block_start without a block", "upstream_malformed"
                            )
                        if idx in index_map or idx in held:
                            raise UpstreamError(
                                502, f"content block {idx} started twice", "upstream_malformed"
                            )
                        if block["type"] == "tool_use":
                            if not isinstance(block.get("id"), str) or not block["id"]:
                                raise _fmt(f"tool_use block {idx} has no id")
                            h = _HeldTool(block["id"], block.get("name"), block.get("input"))
                            held[idx] = h
                            order.append(h)
                            continue
                        index_map[idx] = next_out
                        next_out += 1
                        for piece in pending:
                            yield piece
                        pending.clear()
                        yield sse_event(kind, {**ev, "index": index_map[idx]})
                    elif idx in held:
                        h = held[idx]
                        if kind == "content_block_stop":
                            h.complete = True
                            continue
                        delta = ev.get("delta")
                        if (
                            not isinstance(delta, dict)
                            or delta.get("type") != "input_json_delta"
                            or not isinstance(delta.get("partial_json"), str)
                        ):
                            raise _fmt(
                                f"tool_use block {idx} got a delta that is not input_json_delta"
                            )
                        if h.complete:
                            raise _fmt(f"tool_use block {idx} got a delta after it stopped")
                        h.parts.append(delta["partial_json"])
                    elif idx in index_map:
                        yield sse_event(kind, {**ev, "index": index_map[idx]})
                    else:
                        raise UpstreamError(
                            502, f"{kind} for unknown block {idx}", "upstream_malformed"
                        )
                elif kind == "message_delta":
                    message_delta = ev
                elif kind == "message_stop":
                    stopped = True
                    break
                # any other event type is not relayed (it cannot carry a call we adjudicated)
        if not stopped or message_delta is None:
            raise UpstreamError(
                502,
                "upstream stream ended before message_stop (truncated); no tool call was forwarded",
                "upstream_truncated",
            )
        unfinished = [h for h in order if not h.complete]
        if unfinished:
            raise _fmt(f"tool_use {unfinished[0].id} never stopped")
        proposed = [ProposedCall(h.id, h.name, h.arguments()) for h in order]
        delta_doc = message_delta.get("delta")
        final: dict[str, Any] = delta_doc if isinstance(delta_doc, dict) else {}
        if final.get("stop_reason") == "tool_use" and not proposed:
            raise _fmt("stop_reason is tool_use but no tool_use block was streamed")
        outcome = await adjudicate_proposed(self.state, proposed, trace)
        tail: list[bytes] = list(pending)
        for a in outcome.kept:
            i = next_out
            next_out += 1
            tail.append(
                sse_event(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {
                            "type": "tool_use",
                            "id": a.call.id,
                            "name": a.call.name,
                            "input": {},
                        },
                    },
                )
            )
            tail.append(
                sse_event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": a.arguments},
                    },
                )
            )
            tail.append(sse_event("content_block_stop", {"type": "content_block_stop", "index": i}))
        new_delta = dict(final)
        if outcome.kept:
            new_delta["stop_reason"] = "tool_use"
        elif outcome.dropped:
            i = next_out
            text = refusal_summary(outcome.dropped)
            tail.append(
                sse_event(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            tail.append(
                sse_event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "text_delta", "text": text},
                    },
                )
            )
            tail.append(sse_event("content_block_stop", {"type": "content_block_stop", "index": i}))
            new_delta["stop_reason"] = "end_turn"
        tail.append(
            sse_event(
                "message_delta",
                {**message_delta, "delta": new_delta, "fak": _fak(trace, outcome, results)},
            )
        )
        tail.append(sse_event("message_stop", {"type": "message_stop"}))
        await durable_stream(self.state)
        for piece in tail:
            yield piece
