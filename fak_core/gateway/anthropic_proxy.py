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
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from fak_core.gateway.carriers import (
    ANTHROPIC_BLOCKS,
    Carrier,
    json_text,
    screen_text,
    shown_value,
    strip_fak,
)
from fak_core.gateway.proxy_io import (
    durable_stream,
    event_json,
    sse_event,
    upstream_events,
)
from fak_core.gateway.state import GatewayState, WireError
from fak_core.gateway.text_output import TurnText, record_removals, text_policy
from fak_core.gateway.turn import (
    Adjudication,
    InboundResult,
    ProposedCall,
    TurnOutcome,
    adjudicate_proposed,
    admit_results,
    refusal_summary,
)
from fak_core.gateway.upstream import UpstreamError
from fak_core.gateway.user_words import anthropic_user_words
from fak_core.gateway.wire_proxy import (
    WireProxy,
    require_messages,
    require_model,
    tool_format_error,
)
from fak_core.textlinks import TextStream

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


_KNOWN = sorted(ANTHROPIC_BLOCKS)


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
            if block["type"] not in ANTHROPIC_BLOCKS:
                raise WireError(
                    f"{bwhere}.type: unsupported block type {shown_value(block['type'])}; "
                    f"the fak proxy forwards only the block types it classifies "
                    f"({', '.join(_KNOWN)})",
                    bwhere,
                )
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
    if system is not None and (
        not isinstance(system, str | list)
        or (
            isinstance(system, list)
            and not all(isinstance(b, dict) and b.get("type") == "text" for b in system)
        )
    ):
        raise WireError("system: must be a string or an array of text blocks", "system")


def _carried(block: dict[str, Any], names: dict[str, str], where: str) -> InboundResult:
    """The tool output a block carries: a ``tool_result``'s content (rewritten in place),
    or a provider-run result's whole block (replaced whole by the kernel's text)."""
    tid = block.get("tool_use_id")
    if not isinstance(tid, str) or not tid:
        tid = f"{block['type']}:{where}"
    if block["type"] == "tool_result":
        return InboundResult(tid, names.get(tid, ""), screen_text(block.get("content")))
    server = block.get("mcp_server_name")
    name = names.get(tid) or (server if isinstance(server, str) else "") or block["type"]
    return InboundResult(tid, name, json_text(block), whole_block=True)


def inbound_results(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any], InboundResult]]:
    """Every block that carries tool output (:data:`~fak_core.gateway.carriers.ANTHROPIC_BLOCKS`),
    in either role, named after the tool use it answers when known."""
    names: dict[str, str] = {}
    out = []
    for i, m in enumerate(messages):
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            kind = ANTHROPIC_BLOCKS.get(block["type"])
            if kind is Carrier.TOOL_USE and isinstance(block.get("id"), str):
                names[block["id"]] = str(block.get("name") or "")
            elif kind is Carrier.TOOL_OUTPUT:
                out.append((block, _carried(block, names, f"{i}.{j}")))
    return out


def _tool_input(value: Any) -> Any:
    """The input as the kernel sees it: an object as is; anything else as its JSON text,
    which rung 0 refuses (Anthropic ``input`` must be an object)."""
    return value if isinstance(value, dict) else json_text(value)


def _fak(
    trace: str,
    outcome: TurnOutcome,
    results: list[InboundResult],
    provider_results: list[InboundResult],
) -> dict[str, Any]:
    return {
        "trace_id": trace,
        "adjudications": [a.to_wire() for a in outcome.adjudications],
        "result_admissions": [r.to_wire() for r in results],
        "provider_result_admissions": [r.to_wire() for r in provider_results],
    }


def _kept_input(a: Adjudication, original: Any) -> Any:
    return orjson.loads(a.repaired) if a.repaired is not None else original


def _classify(block: Any, where: str) -> Carrier:
    """The carrier class of an upstream block; an untyped or unclassified block is a 502
    (it could be a tool use the gateway would relay unadjudicated)."""
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise UpstreamError(502, f"upstream {where} is not a typed block", "upstream_malformed")
    kind = ANTHROPIC_BLOCKS.get(block["type"])
    if kind is None:
        raise _fmt(f"{where} has block type {block['type']!r}, which the gateway does not classify")
    return kind


def _use(block: dict[str, Any], where: str) -> ProposedCall:
    if not isinstance(block.get("id"), str) or not block["id"]:
        raise _fmt(f"{where} ({block['type']}) has no id")
    return ProposedCall(block["id"], block.get("name"), _tool_input(block.get("input")))


def _shown_result(block: dict[str, Any], r: InboundResult, kept: set[str]) -> dict[str, Any] | None:
    """What the client sees of a result block in the answer: nothing when it answers a use
    the kernel did not keep, the kernel's text when the admission rewrote it."""
    tid = block.get("tool_use_id")
    if "tool_use_id" in block and not (isinstance(tid, str) and tid in kept):
        return None
    if r.rewritten is not None:
        return {"type": "text", "text": r.rewritten}
    return block


@dataclass
class _HeldTool:
    id: str
    name: Any
    start_input: Any
    block: dict[str, Any]
    parts: list[str] = field(default_factory=list)
    complete: bool = False

    def arguments(self) -> Any:
        """The input the kernel decides: the deltas' JSON text, else the start block's
        input, read as a buffered block's is (null or absent is not an object)."""
        if self.parts:
            text = "".join(self.parts)
            return text if text.strip() else "{}"
        return _tool_input(self.start_input)


@dataclass
class _HeldResult:
    block: dict[str, Any]
    result: InboundResult
    complete: bool = False


def _block_events(index: int, block: dict[str, Any], delta: dict[str, Any] | None) -> list[bytes]:
    """A whole block as its start, optional delta and stop events at ``index``."""
    out = [
        sse_event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": block},
        )
    ]
    if delta is not None:
        out.append(
            sse_event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        )
    out.append(sse_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    return out


def _text_delta(index: int, text: str) -> bytes:
    return sse_event(
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": text},
        },
    )


async def _policed(
    policer: TurnText, stream: TextStream, index: int, kind: str, ev: dict[str, Any]
) -> AsyncGenerator[bytes, None]:
    """A policed text block's delta or stop: its text through the block's stream (the
    words held back go out, decided, before the block stops); other deltas as they are."""
    if kind == "content_block_stop":
        rest = await policer.feed(stream, None)
        if rest:
            yield _text_delta(index, rest)
        yield sse_event(kind, {"type": kind, "index": index})
        return
    delta = ev.get("delta")
    if isinstance(delta, dict) and delta.get("type") == "text_delta":
        text = delta.get("text")
        now = await policer.feed(stream, text if isinstance(text, str) else "")
        if now:
            yield _text_delta(index, now)
        return
    yield sse_event(kind, {**ev, "index": index})


async def _police_blocks(
    state: GatewayState, trace: str, content: list[dict[str, Any]]
) -> TurnText | None:
    """A buffered answer's text blocks, policed in place when the session is tainted (ask
    after the answer's provider-run results are admitted); the turn's policing, if any."""
    policer = text_policy(state, trace)
    if policer is not None:
        for block in content:
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                block["text"] = await policer.police(block["text"])
    return policer


class _BlockText:
    """A streamed answer's text blocks: each started while the session is tainted (or
    after a provider-run result in this answer) is policed through a stream of its own."""

    def __init__(self, state: GatewayState, trace: str) -> None:
        self.state = state
        self.trace = trace
        self.policer = text_policy(state, trace)
        self.streams: dict[int, TextStream] = {}  # upstream index of a policed text block

    def tainted(self) -> None:
        """A provider-run tool's result: it taints the session (it is admitted once the
        turn is complete), so every text block started after it is policed."""
        if self.policer is None and self.state.text_links != "off":
            self.policer = TurnText(self.state, self.trace)

    async def start(self, idx: int, out: int, ev: dict[str, Any]) -> AsyncGenerator[bytes, None]:
        """A relayed block's start at client index ``out``: a policed text block starts
        empty and its first text goes through its stream."""
        block = ev["content_block"]
        first = ""
        if self.policer is not None and block.get("type") == "text":
            self.streams[idx] = self.policer.stream()
            first = str(block.get("text") or "")
            ev = {**ev, "content_block": {**block, "text": ""}}
        yield sse_event("content_block_start", {**ev, "index": out})
        if first and self.policer is not None:
            now = await self.policer.feed(self.streams[idx], first)
            if now:
                yield _text_delta(out, now)

    async def relay(
        self, idx: int, out: int, kind: str, ev: dict[str, Any]
    ) -> AsyncGenerator[bytes, None]:
        """A relayed block's delta or stop at client index ``out``."""
        stream = self.streams.get(idx)
        if stream is not None and self.policer is not None:
            async for piece in _policed(self.policer, stream, out, kind, ev):
                yield piece
        else:
            yield sse_event(kind, {**ev, "index": out})


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

    def user_words(self, doc: dict[str, Any]) -> list[tuple[str, str]]:
        return anthropic_user_words(doc)

    def inbound(self, doc: dict[str, Any]) -> list[tuple[dict[str, Any], InboundResult]]:
        return inbound_results(doc["messages"])

    # ------------------------------------------------------------------ non-streaming
    async def complete_turn(
        self, doc: dict[str, Any], trace: str, results: list[InboundResult]
    ) -> dict[str, Any]:
        strip_fak(doc)  # nothing from upstream speaks for the gateway
        if doc.get("type") == "error":
            raise UpstreamError(502, "upstream returned an error object", "upstream_error")
        content = doc.get("content")
        if not isinstance(content, list):
            raise UpstreamError(502, "upstream message has no content array", "upstream_malformed")
        proposed: list[ProposedCall] = []
        names: dict[str, str] = {}
        carried: dict[int, InboundResult] = {}
        for i, block in enumerate(content):
            kind = _classify(block, f"content[{i}]")
            if kind is Carrier.TOOL_USE:
                proposed.append(_use(block, f"content[{i}]"))
                names[block["id"]] = str(block.get("name") or "")
            elif kind is Carrier.TOOL_OUTPUT:
                carried[i] = _carried(block, names, f"content.{i}")
        client_uses = sum(b["type"] == "tool_use" for b in content)
        if doc.get("stop_reason") == "tool_use" and not client_uses:
            raise _fmt("stop_reason is tool_use but no tool_use block was sent")
        # The provider's results are admitted first: what the model read taints the session
        # before the calls it then proposed are decided.
        if carried:
            await run_in_threadpool(admit_results, self.state, list(carried.values()), trace)
        policer = await _police_blocks(self.state, trace, content)  # after they taint it
        outcome = await adjudicate_proposed(self.state, proposed, trace)
        verdicts = iter(outcome.adjudications)
        kept = {a.call.id for a in outcome.kept}
        new_content = []
        for i, block in enumerate(content):
            kind = ANTHROPIC_BLOCKS[block["type"]]
            if kind is Carrier.TOOL_USE:
                a = next(verdicts)
                if a.admitted:
                    new_content.append({**block, "input": _kept_input(a, block.get("input"))})
            elif kind is Carrier.TOOL_OUTPUT:
                shown = _shown_result(block, carried[i], kept)
                if shown is not None:
                    new_content.append(shown)
            else:
                new_content.append(block)
        if any(b["type"] == "tool_use" for b in new_content):
            doc["stop_reason"] = "tool_use"
        elif outcome.dropped:
            new_content.append({"type": "text", "text": refusal_summary(outcome.dropped)})
            doc["stop_reason"] = "end_turn"
        doc["content"] = new_content
        doc["fak"] = record_removals(_fak(trace, outcome, results, list(carried.values())), policer)
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
        held: dict[int, _HeldTool | _HeldResult] = {}
        order: list[_HeldTool | _HeldResult] = []
        names: dict[str, str] = {}
        next_out = 0
        message_delta: dict[str, Any] | None = None
        started = False
        stopped = False
        # message_start and pings wait for the first relayed block, so a fault before any
        # content is still answered with an HTTP status rather than an in-stream error.
        pending: list[bytes] = []
        texts = _BlockText(self.state, trace)
        async with self.upstream.stream("anthropic", body, client_headers) as resp:
            async for event in upstream_events(resp):
                ev = strip_fak(event_json(event, "Anthropic"))  # upstream never speaks for us
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
                    for j, b in enumerate(msg.get("content") or []):
                        if _classify(b, f"message_start content[{j}]") is not Carrier.PLAIN:
                            raise _fmt(f"{b['type']} inside message_start")
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
                        carrier = _classify(block, f"content_block_start {idx}")
                        assert isinstance(block, dict)
                        if idx in index_map or idx in held:
                            raise UpstreamError(
                                502, f"content block {idx} started twice", "upstream_malformed"
                            )
                        if carrier is Carrier.TOOL_USE:
                            use = _use(block, f"{block['type']} block {idx}")
                            names[use.id] = str(use.name or "")
                            h: _HeldTool | _HeldResult = _HeldTool(
                                use.id, use.name, block.get("input"), block
                            )
                        elif carrier is Carrier.TOOL_OUTPUT:
                            h = _HeldResult(block, _carried(block, names, f"stream.{idx}"))
                            texts.tainted()  # the text after it is policed
                        else:
                            index_map[idx] = next_out
                            next_out += 1
                            for piece in pending:
                                yield piece
                            pending.clear()
                            async for piece in texts.start(idx, index_map[idx], ev):
                                yield piece
                            continue
                        held[idx] = h
                        order.append(h)
                    elif idx in held:
                        self._hold(held[idx], idx, kind, ev)
                    elif idx in index_map:
                        async for piece in texts.relay(idx, index_map[idx], kind, ev):
                            yield piece
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
            raise _fmt(f"{unfinished[0].block['type']} block never stopped")
        uses = [h for h in order if isinstance(h, _HeldTool)]
        carried = [h.result for h in order if isinstance(h, _HeldResult)]
        proposed = [ProposedCall(h.id, h.name, h.arguments()) for h in uses]
        delta_doc = message_delta.get("delta")
        final: dict[str, Any] = delta_doc if isinstance(delta_doc, dict) else {}
        if final.get("stop_reason") == "tool_use" and not any(
            h.block["type"] == "tool_use" for h in uses
        ):
            raise _fmt("stop_reason is tool_use but no tool_use block was streamed")
        if carried:  # what the model read taints the session before its calls are decided
            await run_in_threadpool(admit_results, self.state, carried, trace)
        outcome = await adjudicate_proposed(self.state, proposed, trace)
        verdict_of = {id(h): a for h, a in zip(uses, outcome.adjudications, strict=True)}
        kept = {a.call.id for a in outcome.kept}
        tail: list[bytes] = list(pending)
        client_use = False
        for h in order:
            if isinstance(h, _HeldTool):
                a = verdict_of[id(h)]
                if not a.admitted:
                    continue
                client_use = client_use or h.block["type"] == "tool_use"
                start = {**h.block, "id": a.call.id, "name": a.call.name, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": a.arguments}
                tail += _block_events(next_out, start, delta)
            else:
                shown = _shown_result(h.block, h.result, kept)
                if shown is None:
                    continue
                tail += _block_events(next_out, shown, None)
            next_out += 1
        new_delta = dict(final)
        if client_use:
            new_delta["stop_reason"] = "tool_use"
        elif outcome.dropped:
            text = refusal_summary(outcome.dropped)
            tail += _block_events(
                next_out,
                {"type": "text", "text": ""},
                {"type": "text_delta", "text": text},
            )
            new_delta["stop_reason"] = "end_turn"
        fak = record_removals(_fak(trace, outcome, results, carried), texts.policer)
        tail.append(sse_event("message_delta", {**message_delta, "delta": new_delta, "fak": fak}))
        tail.append(sse_event("message_stop", {"type": "message_stop"}))
        await durable_stream(self.state)
        for piece in tail:
            yield piece

    @staticmethod
    def _hold(h: _HeldTool | _HeldResult, idx: int, kind: str, ev: dict[str, Any]) -> None:
        """Take a held block's delta or stop: a tool use gathers its ``input_json_delta``
        text; a result block takes no delta (it arrives whole)."""
        if kind == "content_block_stop":
            h.complete = True
            return
        what = f"{h.block['type']} block {idx}"
        if isinstance(h, _HeldResult):
            raise _fmt(f"{what} got a delta (a result block arrives whole)")
        delta = ev.get("delta")
        if (
            not isinstance(delta, dict)
            or delta.get("type") != "input_json_delta"
            or not isinstance(delta.get("partial_json"), str)
        ):
            raise _fmt(f"{what} got a delta that is not input_json_delta")
        if h.complete:
            raise _fmt(f"{what} got a delta after it stopped")
        h.parts.append(delta["partial_json"])
