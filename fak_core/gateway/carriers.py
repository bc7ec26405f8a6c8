"""What each part of a proxied turn carries: tool output, a proposed tool use, or plain content.

The proxies admit every carrier of tool output before the turn goes upstream and
adjudicate every proposed tool use before the client sees it. Which parts are which is
this module's explicit table, one per wire, classifying exactly the roles and block types
the official SDKs type (the ``openai`` SDK's ``ChatCompletionMessageParam`` union and its
content parts; the ``anthropic`` SDK's ``ContentBlockParam`` / ``BetaContentBlockParam``
and the response ``ContentBlock`` / ``BetaContentBlock`` unions). A role or block type the
table does not name is refused (a 400 naming it on a request, a 502 on an upstream
answer): an SDK that grows a new carrier cannot slip it past the gateway unclassified.

A provider-run tool (``server_tool_use``, ``mcp_tool_use``) is adjudicated by its name,
like a client tool: the provider has run it by the time its answer arrives, so the
gateway cannot stop that run, but a use the kernel does not allow is removed, with its
result blocks, from what the client receives, and every result block in the answer is
admitted first (so a call proposed after an untrusted fetch is decided on a tainted
session).

:func:`strip_fak` removes any ``fak`` key an upstream put where the gateway writes its own
records, so nothing from upstream speaks for the gateway.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from fak_core.gateway.joined import builtin_secret, joined_text, json_strings
from fak_core.gateway.mcp_content import base64_text
from fak_core.jsondepth import dumps

__all__ = [
    "ANTHROPIC_BLOCKS",
    "ANTHROPIC_ROLES",
    "OPENAI_PARTS",
    "OPENAI_ROLES",
    "OPENAI_TOOL_CALLS",
    "Carrier",
    "json_text",
    "screen_text",
    "shown_value",
    "strip_fak",
]


class Carrier(Enum):
    """What a role or block type carries into or out of the model."""

    TOOL_OUTPUT = "tool_output"  # admitted (taint, quarantine) before the turn goes on
    TOOL_USE = "tool_use"  # a proposed tool use: adjudicated before the client sees it
    PLAIN = "plain"  # the principal's or the model's own content


#: OpenAI chat roles (``ChatCompletionMessageParam``). ``assistant`` messages carry the
#: model's earlier tool calls (history, not proposals: proposals are in the answer).
OPENAI_ROLES: dict[str, Carrier] = {
    "system": Carrier.PLAIN,
    "developer": Carrier.PLAIN,
    "user": Carrier.PLAIN,
    "assistant": Carrier.TOOL_USE,
    "tool": Carrier.TOOL_OUTPUT,
    "function": Carrier.TOOL_OUTPUT,  # the legacy function-calling result
}

#: The content part types each OpenAI role may send in a ``content`` array (a
#: ``function`` message's content is a string or null).
OPENAI_PARTS: dict[str, frozenset[str]] = {
    "system": frozenset({"text"}),
    "developer": frozenset({"text"}),
    "user": frozenset({"text", "image_url", "input_audio", "file"}),
    "assistant": frozenset({"text", "refusal"}),
    "tool": frozenset({"text"}),
    "function": frozenset(),
}

#: OpenAI tool-call types a model may propose (``ChatCompletionMessageToolCallUnion``) →
#: the field of the call's body holding its input (the legacy ``function_call`` is
#: handled beside them, with its ``arguments``).
OPENAI_TOOL_CALLS: dict[str, str] = {"function": "arguments", "custom": "input"}

ANTHROPIC_ROLES = frozenset({"user", "assistant"})

#: Anthropic content block types, request and response, beta included.
ANTHROPIC_BLOCKS: dict[str, Carrier] = {
    # plain content
    "text": Carrier.PLAIN,
    "image": Carrier.PLAIN,
    "document": Carrier.PLAIN,
    "thinking": Carrier.PLAIN,
    "redacted_thinking": Carrier.PLAIN,
    "container_upload": Carrier.PLAIN,
    "compaction": Carrier.PLAIN,
    "tool_addition": Carrier.PLAIN,
    "tool_removal": Carrier.PLAIN,
    "fallback": Carrier.PLAIN,
    # proposed tool uses: the client's tools and the provider's
    "tool_use": Carrier.TOOL_USE,
    "server_tool_use": Carrier.TOOL_USE,
    "mcp_tool_use": Carrier.TOOL_USE,
    # tool output: the client's tools, the provider's, and text that came from a search
    # or an MCP server
    "tool_result": Carrier.TOOL_OUTPUT,
    "web_search_tool_result": Carrier.TOOL_OUTPUT,
    "web_fetch_tool_result": Carrier.TOOL_OUTPUT,
    "code_execution_tool_result": Carrier.TOOL_OUTPUT,
    "bash_code_execution_tool_result": Carrier.TOOL_OUTPUT,
    "text_editor_code_execution_tool_result": Carrier.TOOL_OUTPUT,
    "tool_search_tool_result": Carrier.TOOL_OUTPUT,
    "advisor_tool_result": Carrier.TOOL_OUTPUT,
    "mcp_tool_result": Carrier.TOOL_OUTPUT,
    "mcp_tool_listing": Carrier.TOOL_OUTPUT,
    "search_result": Carrier.TOOL_OUTPUT,
}

#: Keys whose values are a tool's own input or text, never a gateway record.
_OPAQUE = frozenset({"input", "arguments", "partial_json", "text"})
#: How many levels (objects and arrays) below the top :func:`strip_fak` searches: deep
#: enough for a tool call's function in a message in a choice (``choices[i].message.
#: tool_calls[j].function``), and bounded, so a deeply nested upstream body costs no more.
_DEPTH = 6


def strip_fak(doc: Any, depth: int = _DEPTH) -> Any:
    """Remove every ``fak`` key from ``doc`` and the objects under it, down to ``depth``
    levels, skipping tool inputs and text; in place, and returns ``doc``."""
    if isinstance(doc, dict):
        doc.pop("fak", None)
        if depth > 0:
            for key, value in doc.items():
                if isinstance(value, dict | list) and key not in _OPAQUE:
                    strip_fak(value, depth - 1)
    elif isinstance(doc, list) and depth > 0:
        for item in doc:
            if isinstance(item, dict | list):
                strip_fak(item, depth - 1)
    return doc


def shown_value(value: Any) -> str:
    """A refused role or type as an error message names it: its repr, cut at 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def json_text(value: Any) -> str:
    """The JSON text of a decoded wire value, for the kernel's screen; never fails on depth
    or size (:func:`fak_core.jsondepth.dumps`). A value that is not JSON data at all
    becomes every key and scalar in it, one a line, so no text escapes the screen because
    of its shape."""
    try:
        return dumps(value).decode("utf-8")
    except TypeError:
        pass
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                out.append(str(key))
                stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)
        else:
            out.append(repr(item) if isinstance(item, int | float) else str(item))
    return "\n".join(out)


#: The keys a text part may have for the screen to read only its text.
_TEXT_PART_KEYS = frozenset({"type", "text", "cache_control"})


def screen_text(content: Any) -> str:
    """The text the kernel screens of a tool result's content: a string as it is; the
    parts' text when every part is a bare text part (``type``, ``text`` and at most a
    ``cache_control``); otherwise the whole JSON, so nothing a part carries beside its text
    goes upstream unscreened. A secret (a built-in shape) split across parts, text or
    base64 data alike, is screened whole (:func:`fak_core.gateway.joined.joined_text`)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict)
        and p.get("type") == "text"
        and isinstance(p.get("text"), str)
        and p.keys() <= _TEXT_PART_KEYS
        for p in content
    ):
        return "".join(p["text"] for p in content)
    text = json_text(content)
    parts = content if isinstance(content, list) else []
    # image and document parts carry base64 data: screen what can be read in it too
    decoded = [d for p in parts if (d := _decoded(p)) is not None]
    text = "\n".join([text, *decoded]) if decoded else text
    # a secret split across parts: read their texts, then what every part reads as (its
    # text or its decoded data), then every string value, end to end
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    readable = [
        p["text"] if isinstance(p, dict) and isinstance(p.get("text"), str) else _decoded(p) or ""
        for p in parts
    ]
    orders = [texts, readable, json_strings(content, keys=False)]
    return joined_text([text], builtin_secret, orders)


def _decoded(part: Any) -> str | None:
    """What the screen reads in a part's base64 ``source`` (its text when the media type
    names text, else its printable runs), or None when it has none."""
    src = part.get("source") if isinstance(part, dict) else None
    if not isinstance(src, dict) or src.get("type") != "base64":
        return None
    data, mime = src.get("data"), src.get("media_type")
    if not isinstance(data, str):
        return None
    return base64_text(data, mime if isinstance(mime, str) else None)
