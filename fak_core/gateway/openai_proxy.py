"""``POST /v1/chat/completions``: the OpenAI-compatible proxy, kernel-adjudicated.

Before the model runs, every ``role: tool`` message is admitted on the session's trace
(a quarantine rewrites what the model sees, and taint rises). After, every proposed
tool call is adjudicated in order; only ALLOW (verbatim) and TRANSFORM (repaired
arguments) reach the client. Streaming relays text as it arrives and holds tool-call
fragments until the turn is complete and adjudicated. Upstream faults answer 502/503/504
in the OpenAI error envelope, with no tool call.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import Response

from fak_core.gateway.errors import error_body, error_response
from fak_core.gateway.proxy_io import (
    durable_stream,
    event_json,
    sse_data,
    upstream_events,
)
from fak_core.gateway.state import WireError
from fak_core.gateway.turn import (
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

__all__ = ["OpenAIProxy", "validate_chat_request"]

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def _fmt(reason: str) -> UpstreamError:
    return tool_format_error("tool-call", reason)


def validate_chat_request(doc: dict[str, Any]) -> None:
    """Refuse a request the proxy cannot forward faithfully, naming the field to fix."""
    require_model(doc)
    for i, m in enumerate(require_messages(doc)):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise WireError(f"{where}: must be an object", where)
        role = m.get("role")
        if role not in _ROLES:
            raise WireError(f"{where}.role: must be one of {', '.join(sorted(_ROLES))}", where)
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise WireError(f"{where}.content: must be a string, an array or null", where)
        if role == "tool":
            tcid = m.get("tool_call_id")
            if not isinstance(tcid, str) or not tcid:
                raise WireError(f"{where}.tool_call_id: required for role 'tool'", where)
        if role == "assistant" and not isinstance(m.get("tool_calls"), list | None):
            raise WireError(f"{where}.tool_calls: must be an array", where)
    stream = doc.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise WireError("stream: must be a boolean", "stream")
    tools = doc.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise WireError("tools: must be an array", "tools")
    for key in ("max_tokens", "max_completion_tokens", "n"):
        v = doc.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise WireError(f"{key}: must be a non-negative integer", key)
    for key, hi in (("temperature", 2.0), ("top_p", 1.0)):
        v = doc.get(key)
        if v is not None and (
            isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= hi
        ):
            raise WireError(f"{key}: must be a number between 0 and {hi:g}", key)


def _content_text(content: Any) -> str:
    """The text the kernel screens: a string, the text parts, or the whole JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        for p in content
    ):
        return "".join(p["text"] for p in content)
    return dumps(content).decode("utf-8")


def inbound_results(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any], InboundResult]]:
    """Every ``role: tool`` message with the tool name its call had (when the transcript
    says), paired with the message it came from."""
    names: dict[str, str] = {}
    out = []
    for m in messages:
        if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list):
            for tc in m["tool_calls"]:
                fn = tc.get("function") if isinstance(tc, dict) else None
                if isinstance(fn, dict) and isinstance(tc.get("id"), str):
                    names[tc["id"]] = str(fn.get("name") or "")
        elif m.get("role") == "tool":
            tcid = m["tool_call_id"]
            name = m.get("name") if isinstance(m.get("name"), str) else names.get(tcid, "")
            out.append((m, InboundResult(tcid, name or "", _content_text(m.get("content")))))
    return out


def _proposed_from_message(message: dict[str, Any], choice: int) -> list[ProposedCall]:
    if message.get("function_call") is not None:
        raise _fmt("legacy function_call")
    tcs = message.get("tool_calls")
    if tcs is None:
        return []
    if not isinstance(tcs, list):
        raise _fmt("tool_calls is not an array")
    calls = []
    for i, tc in enumerate(tcs):
        if not isinstance(tc, dict) or not isinstance(tc.get("function"), dict):
            raise _fmt(f"tool_calls[{i}] is not a function call")
        if tc.get("type", "function") != "function":
            raise _fmt(f"tool_calls[{i}] has type {tc.get('type')!r}")
        fn = tc["function"]
        tcid = tc.get("id") if isinstance(tc.get("id"), str) and tc.get("id") else ""
        calls.append(
            ProposedCall(tcid or f"call_fak_{choice}_{i}", fn.get("name"), fn.get("arguments"))
        )
    return calls


def _fak(
    trace_id: str, outcomes: list[TurnOutcome], results: list[InboundResult]
) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "adjudications": [
            {**a.to_wire(), "choice": a.choice} for o in outcomes for a in o.adjudications
        ],
        "result_admissions": [r.to_wire() for r in results],
    }


@dataclass
class _StreamChoice:
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish: str | None = None
    text_sent: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class OpenAIProxy(WireProxy):
    """The chat-completions route bound to one gateway state and one upstream."""

    wire = "openai"
    wire_name = "OpenAI"
    other_route = "/v1/messages"

    def error(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        return error_response(status, message, code=code, param=param, headers=headers)

    def error_frame(self, exc: UpstreamError) -> bytes:
        return sse_data(error_body(exc.status, exc.message, code=exc.code))

    def validate(self, doc: dict[str, Any]) -> None:
        validate_chat_request(doc)

    def inbound(self, doc: dict[str, Any]) -> list[tuple[dict[str, Any], InboundResult]]:
        return inbound_results(doc["messages"])

    # ------------------------------------------------------------------ non-streaming
    async def complete_turn(
        self, doc: dict[str, Any], trace: str, results: list[InboundResult]
    ) -> dict[str, Any]:
        choices = doc.get("choices")
        if not isinstance(choices, list):
            raise UpstreamError(502, "upstream response has no choices array", "upstream_malformed")
        outcomes = []
        for pos, choice in enumerate(choices):
            if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
                raise UpstreamError(
                    502, f"upstream choices[{pos}] has no message object", "upstream_malformed"
                )
            idx = choice.get("index", pos)
            message = choice["message"]
            proposed = _proposed_from_message(message, idx)
            if choice.get("finish_reason") == "tool_calls" and not proposed:
                raise _fmt("finish_reason is tool_calls but no tool call was sent")
            outcome = await adjudicate_proposed(self.state, proposed, trace, idx)
            outcomes.append(outcome)
            originals = message.get("tool_calls") or []
            kept = []
            for pos, a in enumerate(outcome.adjudications):
                if not a.admitted:
                    continue
                entry = dict(originals[pos])
                entry.setdefault("id", a.call.id)
                if a.repaired is not None:
                    entry["function"] = {**entry["function"], "arguments": a.repaired}
                kept.append(entry)
            if kept:
                message["tool_calls"] = kept
                choice["finish_reason"] = "tool_calls"
            else:
                message.pop("tool_calls", None)
                if outcome.dropped:
                    choice["finish_reason"] = "stop"
                    summary = refusal_summary(outcome.dropped)
                    text = message.get("content")
                    message["content"] = f"{text}\n\n{summary}" if text else summary
        doc["fak"] = _fak(trace, outcomes, results)
        return doc

    # ------------------------------------------------------------------ streaming
    async def relay(
        self,
        body: bytes,
        client_headers: dict[str, str],
        trace: str,
        results: list[InboundResult],
    ) -> AsyncGenerator[bytes, None]:
        choices: dict[int, _StreamChoice] = {}
        held_meta: list[dict[str, Any]] = []
        base: dict[str, Any] | None = None
        done = False
        async with self.upstream.stream("openai", body, client_headers) as resp:
            async for event in upstream_events(resp):
                if event.data.strip() == "[DONE]":
                    done = True
                    break
                chunk = event_json(event, "OpenAI")
                if chunk.get("error") is not None:
                    err = chunk["error"]
                    msg = err.get("message") if isinstance(err, dict) else str(err)
                    raise UpstreamError(502, f"upstream stream error: {msg}", "upstream_error")
                if base is None:
                    base = {k: v for k, v in chunk.items() if k not in ("choices", "usage", "fak")}
                    base.setdefault("object", "chat.completion.chunk")
                out = self._feed(chunk, choices, held_meta)
                if out is not None:
                    yield sse_data(out)
        if not done and (not choices or any(c.finish is None for c in choices.values())):
            raise UpstreamError(
                502,
                "upstream stream ended before the turn completed (truncated); "
                "no tool call was forwarded",
                "upstream_truncated",
            )
        base = base or {"id": "chatcmpl-fak", "object": "chat.completion.chunk"}
        base.setdefault("created", int(time.time()))
        # Adjudicate every choice before anything of the tail is sent.
        outcomes: list[tuple[int, _StreamChoice, TurnOutcome]] = []
        for idx in sorted(choices):
            ch = choices[idx]
            proposed = []
            for pos in sorted(ch.calls):
                frag = ch.calls[pos]
                proposed.append(
                    ProposedCall(
                        frag.get("id") or f"call_fak_{idx}_{pos}",
                        frag.get("name", ""),
                        "".join(frag.get("args", [])),
                    )
                )
            if ch.finish == "tool_calls" and not proposed:
                raise _fmt("finish_reason is tool_calls but no tool call was streamed")
            outcome = await adjudicate_proposed(self.state, proposed, trace, idx)
            outcomes.append((idx, ch, outcome))
        tail: list[bytes] = []
        for idx, ch, outcome in outcomes:
            kept = outcome.kept
            if kept:
                deltas = [
                    {
                        "index": i,
                        "id": a.call.id,
                        "type": "function",
                        "function": {"name": a.call.name, "arguments": a.arguments},
                    }
                    for i, a in enumerate(kept)
                ]
                tail.append(
                    sse_data(
                        {
                            **base,
                            "choices": [
                                {
                                    "index": idx,
                                    "delta": {"tool_calls": deltas},
                                    "finish_reason": None,
                                }
                            ],
                        }
                    )
                )
                finish = "tool_calls"
            elif outcome.dropped:
                summary = refusal_summary(outcome.dropped)
                text = f"\n\n{summary}" if ch.text_sent else summary
                tail.append(
                    sse_data(
                        {
                            **base,
                            "choices": [
                                {"index": idx, "delta": {"content": text}, "finish_reason": None}
                            ],
                        }
                    )
                )
                finish = "stop"
            else:
                finish = ch.finish or "stop"
            tail.append(
                sse_data(
                    {
                        **base,
                        "choices": [
                            {"index": idx, "delta": {}, "finish_reason": finish, **ch.extra}
                        ],
                    }
                )
            )
        for meta in held_meta:
            tail.append(sse_data({**base, **meta}))
        fak = _fak(trace, [o for _, _, o in outcomes], results)
        tail.append(sse_data({**base, "choices": [], "fak": fak}))
        tail.append(sse_data("[DONE]"))
        await durable_stream(self.state)
        for piece in tail:
            yield piece

    def _feed(
        self,
        chunk: dict[str, Any],
        choices: dict[int, _StreamChoice],
        held_meta: list[dict[str, Any]],
    ) -> dict[str, Any] | None:
        """Hold the tool-call fragments and finish reasons of one chunk; return the part
        of it that may go to the client now (text, role, refusal), or None."""
        raw_choices = chunk.get("choices")
        if raw_choices is None or raw_choices == []:
            extra = {k: v for k, v in chunk.items() if k in ("usage",)}
            if extra:
                held_meta.append({**extra, "choices": []})
            return None
        if not isinstance(raw_choices, list):
            raise UpstreamError(502, "upstream chunk choices is not an array", "upstream_malformed")
        passed = []
        for c in raw_choices:
            if not isinstance(c, dict):
                raise UpstreamError(
                    502, "upstream chunk choice is not an object", "upstream_malformed"
                )
            idx = c.get("index", 0)
            if not isinstance(idx, int):
                raise UpstreamError(
                    502, "upstream chunk choice index is not an integer", "upstream_malformed"
                )
            ch = choices.setdefault(idx, _StreamChoice())
            delta = c.get("delta") or {}
            if not isinstance(delta, dict):
                raise UpstreamError(
                    502, "upstream chunk delta is not an object", "upstream_malformed"
                )
            if delta.get("function_call") is not None:
                raise _fmt("legacy function_call delta")
            frags = delta.get("tool_calls")
            if frags is not None:
                if not isinstance(frags, list):
                    raise _fmt("delta.tool_calls is not an array")
                for frag in frags:
                    self._hold(ch, frag)
            if ch.finish is not None and (frags or delta.get("content")):
                raise UpstreamError(
                    502, "upstream streamed content after the choice finished", "upstream_malformed"
                )
            rest = {k: v for k, v in delta.items() if k != "tool_calls"}
            if c.get("finish_reason") is not None:
                ch.finish = str(c["finish_reason"])
                if c.get("logprobs") is not None:
                    ch.extra["logprobs"] = c["logprobs"]
            if rest and any(v not in (None, "") for v in rest.values()):
                if rest.get("content"):
                    ch.text_sent = True
                out_c = {k: v for k, v in c.items() if k not in ("delta", "finish_reason")}
                passed.append({**out_c, "index": idx, "delta": rest, "finish_reason": None})
        if not passed:
            return None
        return {
            **{k: v for k, v in chunk.items() if k not in ("choices", "usage")},
            "choices": passed,
        }

    @staticmethod
    def _hold(ch: _StreamChoice, frag: Any) -> None:
        if not isinstance(frag, dict):
            raise _fmt("a tool-call fragment is not an object")
        pos = frag.get("index")
        if not isinstance(pos, int) or isinstance(pos, bool):
            raise _fmt("a tool-call fragment has no integer index")
        if frag.get("type") not in (None, "function"):
            raise _fmt(f"a tool-call fragment has type {frag.get('type')!r}")
        acc = ch.calls.setdefault(pos, {"args": []})
        if isinstance(frag.get("id"), str) and frag["id"] and not acc.get("id"):
            acc["id"] = frag["id"]
        fn = frag.get("function")
        if fn is None:
            return
        if not isinstance(fn, dict):
            raise _fmt("a tool-call fragment's function is not an object")
        name = fn.get("name")
        if name is not None:
            if not isinstance(name, str):
                raise _fmt("a tool-call fragment's name is not a string")
            acc["name"] = acc.get("name", "") + name
        args = fn.get("arguments")
        if args is not None:
            if not isinstance(args, str):
                raise _fmt("a tool-call fragment's arguments are not a string")
            acc["args"].append(args)
