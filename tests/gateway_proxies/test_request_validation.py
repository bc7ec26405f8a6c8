"""D10.4: a request the proxy cannot forward faithfully is a 400 naming the field, and never
goes upstream; a request it can forward goes upstream as the client sent it.

Every rule of the two validators is written here as a table of one-field changes to a
request both wires accept, each the value just past a boundary and the value on it: the
model, the messages array and each message, every role and content part type the SDKs
type (and one they do not), the fields a carrier needs (``tool_call_id``, a function
message's ``name``, a ``tool_result``'s ``tool_use_id`` and content), an assistant's
``tool_calls``, ``stream``, ``tools``, the token counts, ``n``, ``temperature``, ``top_p``,
Anthropic's ``max_tokens`` and ``system``. The oracle is the table: the parameter the 400
must name and a phrase of its message, or 200 and the client's own bytes upstream.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from . import sdk_unions as sdk
from .inprocess import in_process_gateway
from .scripted_upstream import Script

_UPSTREAM, _STATE, _APP = in_process_gateway()
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
USER = {"role": "user", "content": "hi"}
ASSISTANT_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
}

#: (change to the request, the param the 400 names or None for a 200, a phrase of the message)
Case = tuple[dict[str, Any], str | None, str]
M0 = "messages[0]"

OPENAI: list[Case] = [
    ({"model": None}, "model", "model: field required"),
    ({"model": 7}, "model", "model: field required"),
    ({"model": " "}, "model", "model: field required"),
    ({"messages": []}, "messages", "messages: field required"),
    ({"messages": {"role": "user"}}, "messages", "messages: field required"),
    ({"messages": ["hi"]}, M0, "messages[0]: must be an object"),
    ({"messages": [{"role": "robot", "content": "x"}]}, M0, "unsupported role 'robot'"),
    ({"messages": [{"role": 3, "content": "x"}]}, M0, "unsupported role 3"),
    ({"messages": [{"role": "user", "content": 5}]}, M0, "must be a string, an array or null"),
    ({"messages": [{"role": "tool", "content": "x"}]}, M0, "tool_call_id: required"),
    ({"messages": [{"role": "tool", "tool_call_id": "", "content": "x"}]}, M0, "tool_call_id"),
    ({"messages": [{"role": "tool", "tool_call_id": 4, "content": "x"}]}, M0, "tool_call_id"),
    ({"messages": [{"role": "tool", "tool_call_id": "c1", "content": "x"}]}, None, ""),
    ({"messages": [{"role": "function", "content": "x"}]}, M0, ".name: required"),
    ({"messages": [{"role": "function", "name": 1, "content": "x"}]}, M0, ".name: required"),
    ({"messages": [{"role": "function", "name": "f", "content": "x"}]}, None, ""),
    ({"messages": [{"role": "assistant", "tool_calls": {}}]}, M0, "tool_calls: must be an array"),
    ({"messages": [{"role": "assistant", "tool_calls": None, "content": "x"}]}, None, ""),
    ({"messages": [ASSISTANT_CALL]}, None, ""),
    ({"messages": [{"role": "user", "content": [{"type": "video"}]}]}, f"{M0}.content[0]", "video"),
    ({"messages": [{"role": "user", "content": ["x"]}]}, f"{M0}.content[0]", "None"),
    ({"stream": "yes"}, "stream", "stream: must be a boolean"),
    ({"stream": False}, None, ""),
    ({"tools": {}}, "tools", "tools: must be an array"),
    ({"tools": []}, None, ""),
    ({"temperature": 2}, None, ""),
    ({"temperature": 0}, None, ""),
    ({"temperature": 2.01}, "temperature", "between 0 and 2"),
    ({"temperature": -0.01}, "temperature", "between 0 and 2"),
    ({"temperature": True}, "temperature", "between 0 and 2"),
    ({"temperature": "1"}, "temperature", "between 0 and 2"),
    ({"top_p": 1}, None, ""),
    ({"top_p": 1.5}, "top_p", "between 0 and 1"),
]
for _key in ("max_tokens", "max_completion_tokens", "n"):
    OPENAI += [
        ({_key: 0}, None, ""),
        ({_key: -1}, _key, f"{_key}: must be a non-negative integer"),
        ({_key: True}, _key, f"{_key}: must be a non-negative integer"),
        ({_key: 1.5}, _key, f"{_key}: must be a non-negative integer"),
    ]

A0 = "messages.0"
B0 = "messages.0.content.0"


def _blocks(*blocks: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": list(blocks)}]}


ANTHROPIC: list[Case] = [
    ({"model": ""}, "model", "model: field required"),
    ({"max_tokens": None}, "max_tokens", "max_tokens: field required"),
    ({"max_tokens": 0}, "max_tokens", "max_tokens: field required"),
    ({"max_tokens": True}, "max_tokens", "max_tokens: field required"),
    ({"max_tokens": "8"}, "max_tokens", "max_tokens: field required"),
    ({"max_tokens": 1}, None, ""),
    ({"messages": None}, "messages", "messages: field required"),
    ({"messages": [3]}, A0, "messages.0: must be an object"),
    ({"messages": [{"role": "system", "content": "x"}]}, A0, "must be 'user' or 'assistant'"),
    ({"messages": [{"role": "assistant", "content": "x"}]}, None, ""),
    ({"messages": [{"role": "user", "content": 7}]}, A0, "must be a string or an array"),
    ({"messages": [{"role": "user", "content": None}]}, A0, "must be a string or an array"),
    (
        {"messages": [USER, {"role": "user", "content": [{"type": "video"}]}]},
        "messages.1.content.0",
        "unsupported block type 'video'",
    ),
    (_blocks("text"), B0, "must be an object with a string 'type'"),
    (_blocks({"type": 1}), B0, "must be an object with a string 'type'"),
    (_blocks({"type": "video"}), B0, "unsupported block type 'video'"),
    (_blocks({"type": "tool_result"}), B0, "tool_use_id: required"),
    (_blocks({"type": "tool_result", "tool_use_id": ""}), B0, "tool_use_id: required"),
    (_blocks({"type": "tool_result", "tool_use_id": 3}), B0, "tool_use_id: required"),
    (_blocks({"type": "tool_result", "tool_use_id": "t", "content": 5}), B0, "string or an array"),
    (_blocks({"type": "tool_result", "tool_use_id": "t", "content": "ok"}), None, ""),
    (_blocks({"type": "tool_result", "tool_use_id": "t"}), None, ""),
    (_blocks({"type": "text", "text": "a"}, {"type": "text", "text": "b"}), None, ""),
    ({"stream": 1}, "stream", "stream: must be a boolean"),
    ({"tools": "all"}, "tools", "tools: must be an array"),
    ({"system": "be brief"}, None, ""),
    ({"system": [{"type": "text", "text": "be brief"}]}, None, ""),
    ({"system": 3}, "system", "system: must be a string or an array of text blocks"),
    ({"system": [{"type": "image"}]}, "system", "array of text blocks"),
    ({"system": ["be brief"]}, "system", "array of text blocks"),
]


def _request(wire: str, change: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"model": "m", "messages": [USER]}
    if wire == "anthropic":
        doc["max_tokens"] = 8
    doc.update(change)
    return {k: v for k, v in doc.items() if v is not None or k in ("model",)}


async def _send(wire: str, docs: list[dict[str, Any]]) -> list[tuple[int, Any, int]]:
    """(status, the error body or whether the upstream got the client's own bytes, how
    many requests reached the upstream) per request."""
    out = []
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=_APP), base_url="http://gw"
    ) as c:
        for doc in docs:
            _UPSTREAM.reset(Script(text="ok"))
            raw = json.dumps(doc).encode()
            r = await c.post(PATHS[wire], content=raw, headers={"content-type": "application/json"})
            seen = _UPSTREAM.requests[-1].body if _UPSTREAM.requests else None
            body = r.json() if r.status_code != 200 else seen == raw
            out.append((r.status_code, body, len(_UPSTREAM.requests)))
    return out


@pytest.mark.fak_theorem("D10.4")
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_request_the_proxy_cannot_forward_is_a_400_naming_the_field(wire: str) -> None:
    table = OPENAI if wire == "openai" else ANTHROPIC
    docs = [_request(wire, change) for change, _, _ in table]
    if wire == "openai":  # a request with the "model" key absent, not null
        docs[0].pop("model")
    for (change, param, phrase), (status, body, upstream) in zip(
        table, asyncio.run(_send(wire, docs)), strict=True
    ):
        if param is None:
            assert status == 200, (change, body)
            assert body is True, f"{change}: the upstream did not get the client's own bytes"
            continue
        assert status == 400, (change, status, body)
        assert upstream == 0, f"{change}: a refused request went upstream"
        err = body["error"]
        assert err["type"] == "invalid_request_error"
        if wire == "openai":
            assert err["param"] == param, (change, err)
        else:  # the Anthropic envelope has no param: the message names the field first
            assert body["type"] == "error"
            assert err["message"].startswith(param), (change, err)
        assert phrase in err["message"], (change, err)


@pytest.mark.fak_theorem("D10.4")
def test_every_role_and_part_type_the_sdk_types_is_forwarded() -> None:
    """The positive side of the tables: each role, with each part type it may send."""
    docs = []
    for role, parts in sorted(sdk.openai_roles().items()):
        m: dict[str, Any] = {"role": role, "content": "x"}
        if role == "tool":
            m["tool_call_id"] = "c1"
        if role == "function":
            m["name"] = "f"
        docs.append(_request("openai", {"messages": [USER, m]}))
        for part in sorted(parts):
            docs.append(_request("openai", {"messages": [USER, {**m, "content": [_part(part)]}]}))
    for status, body, _ in asyncio.run(_send("openai", docs)):
        assert (status, body) == (200, True)


def _part(kind: str) -> dict[str, Any]:
    return {
        "text": {"type": "text", "text": "x"},
        "refusal": {"type": "refusal", "refusal": "x"},
        "image_url": {"type": "image_url", "image_url": {"url": "https://img.example/a.png"}},
        "input_audio": {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        "file": {"type": "file", "file": {"file_data": "aGk=", "filename": "a.txt"}},
    }[kind]
