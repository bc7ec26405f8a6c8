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

from fak_core.gateway.carriers import (
    OPENAI_PARTS,
    OPENAI_ROLES,
    OPENAI_TOOL_CALLS,
    Carrier,
    screen_text,
    shown_value,
    strip_fak,
)
from fak_core.gateway.errors import error_body, error_response
from fak_core.gateway.proxy_io import (
    durable_stream,
    event_json,
    sse_data,
    upstream_events,
)
from fak_core.gateway.state import WireError
from fak_core.gateway.text_output import TurnText, record_removals, text_policy
from fak_core.gateway.turn import (
    Adjudication,
    InboundResult,
    ProposedCall,
    TurnOutcome,
    adjudicate_proposed,
    refusal_summary,
)
from fak_core.gateway.upstream import UpstreamError
from fak_core.gateway.user_words import openai_user_words
from fak_core.gateway.wire_proxy import (
    WireProxy,
    require_messages,
    require_model,
    tool_format_error,
)
from fak_core.textlinks import TextStream

__all__ = ["LEGACY_CALL_ID", "OpenAIProxy", "validate_chat_request"]

#: The id the fak record gives a legacy ``function_call`` (it has none on the wire).
LEGACY_CALL_ID = "function_call"


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
        if not isinstance(role, str) or role not in OPENAI_ROLES:
            raise WireError(
                f"{where}.role: unsupported role {shown_value(role)}; the fak proxy forwards only "
                f"{', '.join(sorted(OPENAI_ROLES))}",
                where,
            )
        _validate_content(m.get("content"), role, where)
        if role == "tool":
            tcid = m.get("tool_call_id")
            if not isinstance(tcid, str) or not tcid:
                raise WireError(f"{where}.tool_call_id: required for role 'tool'", where)
        if role == "function" and not isinstance(m.get("name"), str):
            raise WireError(f"{where}.name: required for role 'function' (a string)", where)
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


def _validate_content(content: Any, role: str, where: str) -> None:
    """A message's content: a string, null, or an array of the part types its role may
    send; an unknown part type is refused by name (it could carry anything)."""
    if content is None or isinstance(content, str):
        return
    parts = OPENAI_PARTS[role]
    if not isinstance(content, list) or not parts:
        also = ", an array" if parts else ""
        raise WireError(f"{where}.content: must be a string{also} or null", where)
    for j, part in enumerate(content):
        pwhere = f"{where}.content[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str) or kind not in parts:
            raise WireError(
                f"{pwhere}.type: unsupported content part type {shown_value(kind)} for role "
                f"{role!r}; "
                f"the fak proxy forwards only {', '.join(sorted(parts))}",
                pwhere,
            )


def call_name(tc: Any) -> str | None:
    """The tool name an assistant's tool call gives the results that answer it, or None
    when it names none: the body under its ``type`` (``function``, ``custom``; every type in
    :data:`~fak_core.gateway.carriers.OPENAI_TOOL_CALLS`) must be an object and the call
    must have a string id."""
    if not isinstance(tc, dict) or not isinstance(tc.get("id"), str):
        return None
    kind = tc.get("type", "function")
    body = tc.get(kind) if isinstance(kind, str) and kind in OPENAI_TOOL_CALLS else None
    return str(body.get("name") or "") if isinstance(body, dict) else None


def inbound_results(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any], InboundResult]]:
    """Every message whose role carries tool output (``tool``, the legacy ``function``;
    :data:`~fak_core.gateway.carriers.OPENAI_ROLES`), with the tool name its call had
    (when the transcript says), paired with the message it came from."""
    names: dict[str, str] = {}
    out = []
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "assistant" and isinstance(m.get("tool_calls"), list):
            for tc in m["tool_calls"]:
                name = call_name(tc)
                if name is not None:
                    names[tc["id"]] = name
        if OPENAI_ROLES.get(role) is not Carrier.TOOL_OUTPUT:
            continue
        tcid = m.get("tool_call_id")
        if not isinstance(tcid, str) or not tcid:
            tcid = f"{role}:{i}"
        name = m.get("name") if isinstance(m.get("name"), str) else names.get(tcid, "")
        out.append((m, InboundResult(tcid, name or "", screen_text(m.get("content")))))
    return out


def _proposed_from_message(message: dict[str, Any], choice: int) -> list[ProposedCall]:
    """The message's proposals: its ``tool_calls`` (each type in
    :data:`~fak_core.gateway.carriers.OPENAI_TOOL_CALLS`), or its legacy ``function_call``."""
    tcs = message.get("tool_calls")
    fc = message.get("function_call")
    if fc is not None:
        if tcs:
            raise _fmt("a message with both function_call and tool_calls")
        if not isinstance(fc, dict):
            raise _fmt("function_call is not an object")
        return [ProposedCall(LEGACY_CALL_ID, fc.get("name"), fc.get("arguments"))]
    if tcs is None:
        return []
    if not isinstance(tcs, list):
        raise _fmt("tool_calls is not an array")
    calls = []
    for i, tc in enumerate(tcs):
        kind = tc.get("type", "function") if isinstance(tc, dict) else None
        field_name = OPENAI_TOOL_CALLS.get(kind) if isinstance(kind, str) else None
        if field_name is None:
            raise _fmt(f"tool_calls[{i}] has type {kind!r}, which the gateway does not classify")
        body = tc.get(kind)
        if not isinstance(body, dict):
            raise _fmt(f"tool_calls[{i}] has no {kind} object")
        tcid = tc.get("id") if isinstance(tc.get("id"), str) and tc.get("id") else ""
        calls.append(
            ProposedCall(tcid or f"call_fak_{choice}_{i}", body.get("name"), body.get(field_name))
        )
    return calls


def _kept_call(original: dict[str, Any], a: Adjudication) -> dict[str, Any]:
    """A kept tool call as the client receives it: the original, under the id the
    gateway's record gives it (the upstream's, or the one minted for a call sent without
    a usable id), with the kernel's repaired arguments when it transformed them."""
    entry = dict(original)
    entry["id"] = a.call.id
    if a.repaired is not None:
        kind = entry.get("type", "function")
        entry[kind] = {**entry[kind], OPENAI_TOOL_CALLS[kind]: a.repaired}
    return entry


def _apply(choice: dict[str, Any], message: dict[str, Any], outcome: TurnOutcome) -> None:
    """Leave only the kept proposals in ``message``; a turn whose every proposal was
    refused ends with ``stop`` and the refusal summary."""
    legacy = message.get("function_call") is not None
    if legacy and outcome.kept:
        a = outcome.kept[0]
        fc = message["function_call"]
        arguments = a.repaired if a.repaired is not None else fc.get("arguments")
        message["function_call"] = {**fc, "arguments": arguments}
        choice["finish_reason"] = "function_call"
        return
    message.pop("function_call", None)
    originals = message.get("tool_calls") or []
    kept = [
        _kept_call(originals[pos], a) for pos, a in enumerate(outcome.adjudications) if a.admitted
    ]
    if kept:
        message["tool_calls"] = kept
        choice["finish_reason"] = "tool_calls"
        return
    message.pop("tool_calls", None)
    if outcome.dropped:
        choice["finish_reason"] = "stop"
        summary = refusal_summary(outcome.dropped)
        text = message.get("content")
        message["content"] = f"{text}\n\n{summary}" if text else summary


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
    function: dict[str, Any] | None = None  # a legacy function_call's name and argument text
    finish: str | None = None
    text_sent: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


async def _police_chunk(
    policer: TurnText | None, streams: dict[tuple[int, str], TextStream], out: dict[str, Any]
) -> dict[str, Any] | None:
    """A chunk's text deltas, each through its choice's stream: what may go out now (a
    delta left with nothing is dropped, a chunk left with no choice is None); the chunk
    as it is when the turn is not policed."""
    if policer is None:
        return out
    passed = []
    for c in out["choices"]:
        delta = dict(c["delta"])
        for key in _TEXT_FIELDS:
            piece = delta.get(key)
            if not isinstance(piece, str):
                continue
            text_stream = streams.get((c["index"], key))
            if text_stream is None:
                text_stream = streams[(c["index"], key)] = policer.stream()
            now = await policer.feed(text_stream, piece)
            if now:
                delta[key] = now
            else:
                del delta[key]
        if any(v not in (None, "") for v in delta.values()):
            passed.append({**c, "delta": delta})
    return {**out, "choices": passed} if passed else None


#: The fields of a message or delta that carry the model's text to the client.
_TEXT_FIELDS = ("content", "refusal")


async def _police_message(policer: TurnText | None, message: dict[str, Any]) -> None:
    """The model's text in a message (the SDK types ``content`` and ``refusal`` as
    strings), policed when the turn is."""
    if policer is None:
        return
    for key in _TEXT_FIELDS:
        value = message.get(key)
        if isinstance(value, str):
            message[key] = await policer.police(value)


async def _held_text(
    policer: TurnText | None, streams: dict[tuple[int, str], TextStream], base: dict[str, Any]
) -> list[bytes]:
    """The chunks of the words each policed choice still holds when the stream ends,
    decided."""
    out = []
    if policer is not None:
        for (idx, key), text_stream in streams.items():
            rest = await policer.feed(text_stream, None)
            if rest:
                choice = {"index": idx, "delta": {key: rest}, "finish_reason": None}
                out.append(sse_data({**base, "choices": [choice]}))
    return out


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

    def user_words(self, doc: dict[str, Any]) -> list[tuple[str, str]]:
        return openai_user_words(doc)

    def inbound(self, doc: dict[str, Any]) -> list[tuple[dict[str, Any], InboundResult]]:
        return inbound_results(doc["messages"])

    # ------------------------------------------------------------------ non-streaming
    async def complete_turn(
        self, doc: dict[str, Any], trace: str, results: list[InboundResult]
    ) -> dict[str, Any]:
        strip_fak(doc)  # nothing from upstream speaks for the gateway
        choices = doc.get("choices")
        if not isinstance(choices, list):
            raise UpstreamError(502, "upstream response has no choices array", "upstream_malformed")
        outcomes = []
        policer = text_policy(self.state, trace)
        for pos, choice in enumerate(choices):
            if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
                raise UpstreamError(
                    502, f"upstream choices[{pos}] has no message object", "upstream_malformed"
                )
            idx = choice.get("index", pos)
            message = choice["message"]
            await _police_message(policer, message)
            proposed = _proposed_from_message(message, idx)
            if choice.get("finish_reason") in ("tool_calls", "function_call") and not proposed:
                raise _fmt("finish_reason is tool_calls but no tool call was sent")
            outcome = await adjudicate_proposed(self.state, proposed, trace, idx)
            outcomes.append(outcome)
            _apply(choice, message, outcome)
        doc["fak"] = record_removals(_fak(trace, outcomes, results), policer)
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
        policer = text_policy(self.state, trace)
        streams: dict[tuple[int, str], TextStream] = {}
        async with self.upstream.stream("openai", body, client_headers) as resp:
            async for event in upstream_events(resp):
                if event.data.strip() == "[DONE]":
                    done = True
                    break
                chunk = strip_fak(event_json(event, "OpenAI"))  # upstream never speaks for us
                if chunk.get("error") is not None:
                    err = chunk["error"]
                    msg = err.get("message") if isinstance(err, dict) else str(err)
                    raise UpstreamError(502, f"upstream stream error: {msg}", "upstream_error")
                if base is None:
                    base = {k: v for k, v in chunk.items() if k not in ("choices", "usage")}
                    base.setdefault("object", "chat.completion.chunk")
                out = self._feed(chunk, choices, held_meta)
                if out is not None:
                    out = await _police_chunk(policer, streams, out)
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
        for held_chunk in await _held_text(policer, streams, base):  # the words held back
            yield held_chunk
        # Adjudicate every choice before anything of the tail is sent.
        outcomes: list[tuple[int, _StreamChoice, TurnOutcome]] = []
        for idx in sorted(choices):
            ch = choices[idx]
            proposed = []
            if ch.function is not None:
                if ch.calls:
                    raise _fmt("a choice streamed both function_call and tool_calls")
                fn = ch.function
                proposed.append(ProposedCall(LEGACY_CALL_ID, fn["name"], "".join(fn["args"])))
            for pos in sorted(ch.calls):
                frag = ch.calls[pos]
                proposed.append(
                    ProposedCall(
                        frag.get("id") or f"call_fak_{idx}_{pos}",
                        frag.get("name", ""),
                        "".join(frag.get("args", [])),
                    )
                )
            if ch.finish in ("tool_calls", "function_call") and not proposed:
                raise _fmt("finish_reason is tool_calls but no tool call was streamed")
            outcome = await adjudicate_proposed(self.state, proposed, trace, idx)
            outcomes.append((idx, ch, outcome))
        head = base

        def frame(
            idx: int, delta: dict[str, Any], finish: str | None = None, **extra: Any
        ) -> bytes:
            choice = {"index": idx, "delta": delta, "finish_reason": finish, **extra}
            return sse_data({**head, "choices": [choice]})

        tail: list[bytes] = []
        for idx, ch, outcome in outcomes:
            kept = outcome.kept
            if kept and ch.function is not None:
                call = {"name": kept[0].call.name, "arguments": kept[0].arguments}
                tail.append(frame(idx, {"function_call": call}))
                finish = "function_call"
            elif kept:
                deltas = [
                    {
                        "index": i,
                        "id": a.call.id,
                        "type": "function",
                        "function": {"name": a.call.name, "arguments": a.arguments},
                    }
                    for i, a in enumerate(kept)
                ]
                tail.append(frame(idx, {"tool_calls": deltas}))
                finish = "tool_calls"
            elif outcome.dropped:
                summary = refusal_summary(outcome.dropped)
                tail.append(frame(idx, {"content": f"\n\n{summary}" if ch.text_sent else summary}))
                finish = "stop"
            else:
                finish = ch.finish or "stop"
            tail.append(frame(idx, {}, finish, **ch.extra))
        for meta in held_meta:
            tail.append(sse_data({**base, **meta}))
        fak = record_removals(_fak(trace, [o for _, _, o in outcomes], results), policer)
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
        self._hold_usage(chunk, held_meta)
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
            legacy = delta.get("function_call")
            if legacy is not None:
                self._hold_function(ch, legacy)
            frags = delta.get("tool_calls")
            if frags is not None:
                if not isinstance(frags, list):
                    raise _fmt("delta.tool_calls is not an array")
                for frag in frags:
                    self._hold(ch, frag)
            if ch.finish is not None and (frags or legacy or delta.get("content")):
                raise UpstreamError(
                    502, "upstream streamed content after the choice finished", "upstream_malformed"
                )
            rest = {k: v for k, v in delta.items() if k not in ("tool_calls", "function_call")}
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
    def _hold_usage(chunk: dict[str, Any], held_meta: list[dict[str, Any]]) -> None:
        """A usage the upstream put on a chunk that also carries choices: held, and sent in
        a frame of its own (no choices) before the gateway's record, as a usage sent alone
        is; the chunk's choices go on without it."""
        if chunk.get("usage") is not None:
            held_meta.append({"usage": chunk["usage"], "choices": []})

    @staticmethod
    def _hold_function(ch: _StreamChoice, frag: Any) -> None:
        """Gather a legacy ``function_call`` delta's name and argument text."""
        if not isinstance(frag, dict):
            raise _fmt("a function_call delta is not an object")
        acc = ch.function = ch.function or {"name": "", "args": []}
        for key, into in (("name", "name"), ("arguments", "args")):
            piece = frag.get(key)
            if piece is None:
                continue
            if not isinstance(piece, str):
                raise _fmt(f"a function_call delta's {key} is not a string")
            if into == "name":
                acc["name"] += piece
            else:
                acc["args"].append(piece)

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
