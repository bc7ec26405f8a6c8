"""The wire formats as the official SDKs type them, read from the installed ``openai`` and
``anthropic`` packages at test time (``typing.get_args``, TypedDict annotations, pydantic
fields), so a role or block type an SDK adds later shows up here, and in the witnesses,
before the gateway has classified it.

The oracle of which parts carry tool output is the test's own: a structural rule over
the SDK types (a part that answers a tool use by id), plus the few parts whose text came
from a tool without answering one by id, named here with the reason.
"""

from __future__ import annotations

import re
import typing
from functools import cache
from typing import Any

import anthropic.types as at
import anthropic.types.beta as bt
import openai.types.chat as oc
import typing_extensions


def members(tp: Any) -> list[Any]:
    """The TypedDicts and pydantic models in a (possibly nested, annotated,
    iterable-wrapped) union; plain types (``str``, ``None``) are not members."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return members(typing.get_args(tp)[0])
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return []
    if not args:
        shaped = typing_extensions.is_typeddict(tp) or hasattr(tp, "model_fields")
        return [tp] if isinstance(tp, type) and shaped else []
    out: list[Any] = []
    for a in args:
        out += members(a)
    return out


def _annotation(cls: Any, key: str) -> Any:
    if hasattr(cls, "model_fields"):
        field = cls.model_fields.get(key)
        return None if field is None else field.annotation
    return typing.get_type_hints(cls, include_extras=True).get(key)


def _raw_keys(cls: Any) -> set[str]:
    if hasattr(cls, "model_fields"):
        return set(cls.model_fields)
    keys: set[str] = set()
    for klass in getattr(cls, "__mro__", (cls,)):
        keys |= set(getattr(klass, "__annotations__", {}))
    return keys


def literal_of(cls: Any, key: str = "type") -> str:
    """The one literal value a TypedDict or pydantic model gives ``key``."""
    if hasattr(cls, "model_fields"):
        values = typing.get_args(cls.model_fields[key].annotation)
    else:  # some TypedDicts' hints do not evaluate (forward refs): read the literal's text
        raw = cls.__annotations__[key]
        text = raw.__forward_arg__ if isinstance(raw, typing.ForwardRef) else str(raw)
        values = tuple(re.findall(r"Literal\['([^']+)'\]", text))
    assert len(values) == 1, (cls, key, values)
    return str(values[0])


# ------------------------------------------------------------------------------ OpenAI
@cache
def openai_roles() -> dict[str, frozenset[str]]:
    """Role → the part types its ``content`` array may hold (``ChatCompletionMessageParam``)."""
    out: dict[str, frozenset[str]] = {}
    for cls in members(oc.ChatCompletionMessageParam):
        role = literal_of(cls, "role")
        parts = {literal_of(p) for p in members(_annotation(cls, "content"))}
        out[role] = frozenset(parts)
    return out


@cache
def openai_tool_output_roles() -> frozenset[str]:
    """Roles that carry tool output: a message answering a tool call by id, and the legacy
    ``function`` message (the function's output, named by the function)."""
    roles = {
        literal_of(cls, "role")
        for cls in members(oc.ChatCompletionMessageParam)
        if "tool_call_id" in _raw_keys(cls)
    }
    return frozenset(roles | {"function"})


@cache
def openai_tool_call_types() -> frozenset[str]:
    """The tool-call types a model's answer may hold (``ChatCompletionMessage.tool_calls``)."""
    ann = oc.ChatCompletionMessage.model_fields["tool_calls"].annotation
    return frozenset(literal_of(c) for c in members(ann))


# --------------------------------------------------------------------------- Anthropic
_REQUEST_UNIONS = (at.ContentBlockParam, bt.BetaContentBlockParam)
_RESPONSE_UNIONS = (at.ContentBlock, bt.BetaContentBlock)


@cache
def anthropic_request_blocks() -> dict[str, Any]:
    """Block type → its param class, over ``ContentBlockParam`` and ``BetaContentBlockParam``
    (the beta union also admits the response blocks, sent back as they came)."""
    out: dict[str, Any] = {}
    for union in _REQUEST_UNIONS:
        for cls in members(union):
            out.setdefault(literal_of(cls), cls)
    return out


@cache
def anthropic_response_blocks() -> dict[str, Any]:
    """Block type → its model, over ``ContentBlock``, ``BetaContentBlock`` and the blocks a
    stream's ``content_block_start`` may open."""
    unions: list[Any] = list(_RESPONSE_UNIONS)
    for start in (at.RawContentBlockStartEvent, bt.BetaRawContentBlockStartEvent):
        unions.append(start.model_fields["content_block"].annotation)
    out: dict[str, Any] = {}
    for union in unions:
        for cls in members(union):
            out.setdefault(literal_of(cls), cls)
    return out


def anthropic_block_types() -> frozenset[str]:
    return frozenset(anthropic_request_blocks()) | frozenset(anthropic_response_blocks())


#: Blocks whose text came from a tool though they answer none by id: search results the
#: client brings (the documented shape of a search tool's output), and an MCP server's
#: tool listing (descriptions written by that server).
_TOOL_TEXT_WITHOUT_ID = frozenset({"search_result", "mcp_tool_listing"})


@cache
def anthropic_tool_output_blocks() -> frozenset[str]:
    """Block types that carry tool output: each answers a tool use by ``tool_use_id``."""
    blocks = {**anthropic_request_blocks(), **anthropic_response_blocks()}
    answering = {t for t, cls in blocks.items() if "tool_use_id" in _raw_keys(cls)}
    return frozenset(answering | _TOOL_TEXT_WITHOUT_ID)


@cache
def anthropic_tool_use_blocks() -> frozenset[str]:
    """Block types a model proposes a tool use with: an id, a tool name and an input."""
    return frozenset(
        t
        for t, cls in anthropic_response_blocks().items()
        if {"id", "name", "input"} <= _raw_keys(cls)
    )
