"""The embedded scripted planner: a tiny model upstream that runs offline.

A rules file (``fak-planner/v1``, JSON or TOML) maps the latest user text (a substring
or a regular expression) to a reply: text and/or proposed tool calls. The planner is an
ASGI app that answers ``/v1/chat/completions`` and ``/v1/messages`` exactly as the real
upstreams would (non-streaming and SSE), and :func:`planner_upstream` mounts it behind
``httpx.ASGITransport``, so the proxy code path is the one a real upstream takes.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from fak_core.gateway.upstream import UpstreamConfig

__all__ = [
    "PLANNER_VERSION",
    "Planner",
    "PlannerError",
    "Reply",
    "Rule",
    "default_planner",
    "load_planner",
    "parse_planner",
    "planner_app",
    "planner_upstream",
]

PLANNER_VERSION = "fak-planner/v1"
PLANNER_MODEL = "fak-scripted-planner"
_RULE_KEYS = ("when", "text", "tool_calls")
_WHEN_KEYS = ("contains", "regex")


class PlannerError(ValueError):
    """A rules document that cannot be used; the message names the key and the fix."""


@dataclass(frozen=True)
class PlannedCall:
    name: str
    arguments: Any  # a JSON object, or a string sent verbatim (to script malformed args)

    def text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return orjson.dumps(self.arguments).decode("utf-8")


@dataclass(frozen=True)
class Reply:
    text: str = ""
    tool_calls: tuple[PlannedCall, ...] = ()


@dataclass(frozen=True)
class Rule:
    contains: str | None
    regex: re.Pattern[str] | None
    reply: Reply

    def matches(self, text: str) -> bool:
        if self.contains is not None and self.contains.lower() not in text.lower():
            return False
        return not (self.regex is not None and not self.regex.search(text))


@dataclass(frozen=True)
class Planner:
    rules: tuple[Rule, ...]
    fallback: Reply

    def reply(self, user_text: str) -> Reply:
        """The first matching rule's reply, else the fallback."""
        for rule in self.rules:
            if rule.matches(user_text):
                return rule.reply
        return self.fallback


def _reply(doc: Any, where: str) -> Reply:
    if not isinstance(doc, dict):
        raise PlannerError(f"{where}: expected a table with 'text' and/or 'tool_calls'")
    text = doc.get("text", "")
    if not isinstance(text, str):
        raise PlannerError(f"{where}.text: expected a string")
    calls_doc = doc.get("tool_calls", [])
    if not isinstance(calls_doc, list):
        raise PlannerError(f"{where}.tool_calls: expected a list of {{name, arguments}}")
    calls = []
    for i, c in enumerate(calls_doc):
        cw = f"{where}.tool_calls[{i}]"
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
            raise PlannerError(f"{cw}: expected a table with a non-empty string 'name'")
        unknown = sorted(set(c) - {"name", "arguments"})
        if unknown:
            raise PlannerError(f"{cw}: unknown key {unknown[0]!r}; valid: name, arguments")
        args = c.get("arguments", {})
        if not isinstance(args, dict | str):
            raise PlannerError(f"{cw}.arguments: expected a table or a raw JSON string")
        calls.append(PlannedCall(c["name"], args))
    if not text and not calls:
        raise PlannerError(f"{where}: a reply needs 'text' or 'tool_calls'")
    return Reply(text, tuple(calls))


def parse_planner(doc: Any) -> Planner:
    """Validate a decoded rules document and build the :class:`Planner`."""
    if not isinstance(doc, dict):
        raise PlannerError("a planner rules document must be a JSON object / TOML table")
    unknown = sorted(set(doc) - {"version", "rules", "fallback"})
    if unknown:
        raise PlannerError(f"unknown key {unknown[0]!r}; valid keys: version, rules, fallback")
    if doc.get("version", PLANNER_VERSION) != PLANNER_VERSION:
        raise PlannerError(f"version: expected {PLANNER_VERSION!r}, got {doc.get('version')!r}")
    rules_doc = doc.get("rules", [])
    if not isinstance(rules_doc, list):
        raise PlannerError("rules: expected a list of rules")
    rules = []
    for i, r in enumerate(rules_doc):
        where = f"rules[{i}]"
        if not isinstance(r, dict):
            raise PlannerError(f"{where}: expected a table")
        unknown = sorted(set(r) - set(_RULE_KEYS))
        if unknown:
            raise PlannerError(
                f"{where}: unknown key {unknown[0]!r}; valid: {', '.join(_RULE_KEYS)}"
            )
        when = r.get("when")
        if not isinstance(when, dict) or not when or set(when) - set(_WHEN_KEYS):
            raise PlannerError(f"{where}.when: expected a table with 'contains' and/or 'regex'")
        contains = when.get("contains")
        if contains is not None and (not isinstance(contains, str) or not contains):
            raise PlannerError(f"{where}.when.contains: expected a non-empty string")
        pattern = when.get("regex")
        regex = None
        if pattern is not None:
            if not isinstance(pattern, str):
                raise PlannerError(f"{where}.when.regex: expected a string")
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise PlannerError(
                    f"{where}.when.regex: invalid pattern {pattern!r}: {exc}"
                ) from None
        rules.append(Rule(contains, regex, _reply(r, where)))
    fallback = _reply(doc.get("fallback", {"text": "(no planner rule matched)"}), "fallback")
    return Planner(tuple(rules), fallback)


def load_planner(path: str | Path) -> Planner:
    """Load a rules file (``.toml`` as TOML, anything else as JSON)."""
    p = Path(path)
    data = p.read_bytes()
    try:
        doc = tomllib.loads(data.decode("utf-8")) if p.suffix == ".toml" else orjson.loads(data)
    except (tomllib.TOMLDecodeError, orjson.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlannerError(
            f"{p}: not valid {'TOML' if p.suffix == '.toml' else 'JSON'}: {exc}"
        ) from None
    return parse_planner(doc)


def default_planner() -> Planner:
    """The rules shipped with the package (``planner_rules.json``)."""
    data = resources.files("fak_core.gateway").joinpath("planner_rules.json").read_bytes()
    return parse_planner(orjson.loads(data))


# ---------------------------------------------------------------------- reading a turn
def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def last_user_text(messages: Any) -> str:
    """The text of the latest user message that has text (tool results are skipped)."""
    if not isinstance(messages, list):
        return ""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            text = _text_of(m.get("content"))
            if text:
                return text
    return ""


def _chunks(text: str, n: int = 3) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


# ---------------------------------------------------------------------- the two wires
class _Wires:
    def __init__(self, planner: Planner) -> None:
        self.planner = planner
        self._ids = itertools.count(1)

    def _bad(self, message: str, anthropic: bool) -> Response:
        if anthropic:
            body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        else:
            body = {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "code": None,
                    "param": None,
                }
            }
        return JSONResponse(body, status_code=400)

    async def openai(self, request: Request) -> Response:
        try:
            doc = orjson.loads(await request.body())
        except orjson.JSONDecodeError as exc:
            return self._bad(f"malformed JSON body: {exc}", False)
        if not isinstance(doc, dict):
            return self._bad("request body must be a JSON object", False)
        reply = self.planner.reply(last_user_text(doc.get("messages")))
        n = next(self._ids)
        model = doc.get("model") or PLANNER_MODEL
        calls = [
            {
                "id": f"call_plan{n}_{i}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.text()},
            }
            for i, c in enumerate(reply.tool_calls)
        ]
        finish = "tool_calls" if calls else "stop"
        head = {"id": f"chatcmpl-plan{n}", "created": int(time.time()), "model": model}
        if doc.get("stream") is True:
            return StreamingResponse(
                self._openai_stream(head, reply, calls, finish), media_type="text/event-stream"
            )
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if calls:
            message["tool_calls"] = calls
        return JSONResponse(
            {
                **head,
                "object": "chat.completion",
                "choices": [
                    {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    @staticmethod
    def _openai_stream(
        head: dict[str, Any], reply: Reply, calls: list[dict[str, Any]], finish: str
    ) -> Iterator[bytes]:
        def frame(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            chunk = {
                **head,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
            return b"data: " + orjson.dumps(chunk) + b"\n\n"

        yield frame({"role": "assistant", "content": ""})
        for piece in _chunks(reply.text):
            yield frame({"content": piece})
        for i, c in enumerate(calls):
            fn = c["function"]
            yield frame(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": fn["name"], "arguments": ""},
                        }
                    ]
                }
            )
            for piece in _chunks(fn["arguments"], 2):
                yield frame({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
        yield frame({}, finish)
        yield b"data: [DONE]\n\n"

    async def anthropic(self, request: Request) -> Response:
        try:
            doc = orjson.loads(await request.body())
        except orjson.JSONDecodeError as exc:
            return self._bad(f"malformed JSON body: {exc}", True)
        if not isinstance(doc, dict):
            return self._bad("request body must be a JSON object", True)
        reply = self.planner.reply(last_user_text(doc.get("messages")))
        n = next(self._ids)
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for i, c in enumerate(reply.tool_calls):
            args: Any = c.arguments
            if isinstance(args, str):  # a scripted raw string: send it as the input value
                with contextlib.suppress(orjson.JSONDecodeError):
                    args = orjson.loads(args)
            content.append(
                {"type": "tool_use", "id": f"toolu_plan{n}_{i}", "name": c.name, "input": args}
            )
        stop = "tool_use" if reply.tool_calls else "end_turn"
        msg = {
            "id": f"msg_plan{n}",
            "type": "message",
            "role": "assistant",
            "model": doc.get("model") or PLANNER_MODEL,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        if doc.get("stream") is True:
            return StreamingResponse(
                self._anthropic_stream(msg, reply), media_type="text/event-stream"
            )
        return JSONResponse(msg)

    @staticmethod
    def _anthropic_stream(msg: dict[str, Any], reply: Reply) -> Iterator[bytes]:
        def ev(kind: str, data: dict[str, Any]) -> bytes:
            return (
                f"event: {kind}\ndata: ".encode() + orjson.dumps({"type": kind, **data}) + b"\n\n"
            )

        start = {
            **msg,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 1, "output_tokens": 0},
        }
        yield ev("message_start", {"message": start})
        for i, block in enumerate(msg["content"]):
            if block["type"] == "text":
                yield ev(
                    "content_block_start",
                    {"index": i, "content_block": {"type": "text", "text": ""}},
                )
                for piece in _chunks(block["text"]):
                    yield ev(
                        "content_block_delta",
                        {"index": i, "delta": {"type": "text_delta", "text": piece}},
                    )
            else:
                head = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                yield ev("content_block_start", {"index": i, "content_block": head})
                planned = reply.tool_calls[i - (1 if reply.text else 0)]
                for piece in _chunks(planned.text(), 2):
                    yield ev(
                        "content_block_delta",
                        {"index": i, "delta": {"type": "input_json_delta", "partial_json": piece}},
                    )
            yield ev("content_block_stop", {"index": i})
        yield ev(
            "message_delta",
            {
                "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": 1},
            },
        )
        yield ev("message_stop", {})


def planner_app(planner: Planner | None = None) -> Starlette:
    """The planner as an ASGI app speaking both wires under ``/v1``."""
    wires = _Wires(planner if planner is not None else default_planner())
    return Starlette(
        routes=[
            Route("/v1/chat/completions", wires.openai, methods=["POST"]),
            Route("/v1/messages", wires.anthropic, methods=["POST"]),
        ]
    )


def planner_upstream(planner: Planner | None = None, timeout: float = 30.0) -> UpstreamConfig:
    """An :class:`UpstreamConfig` whose upstream is the planner, in process."""
    return UpstreamConfig(
        base_url="http://fak-planner/v1",
        timeout=timeout,
        transport=httpx.ASGITransport(app=planner_app(planner)),
    )
