"""The user's and system's own words in a proxied turn: the trusted context of a session.

Each turn carries the whole conversation; the proxies hand the kernel the text the user
and the system wrote (``Kernel.record_trusted``), so destinations named in them are
grounded (policy v2, :mod:`fak_core.grounding`). Only text parts are read: a tool result
(an OpenAI ``tool`` message, an Anthropic ``tool_result`` block inside a user message)
and anything the assistant wrote are never the user's words.
"""

from __future__ import annotations

from typing import Any

__all__ = ["anthropic_user_words", "openai_user_words"]

_OPENAI_ROLES = {"user": "user", "system": "system", "developer": "system"}


def _texts(content: Any) -> list[str]:
    """A message content's text: the string itself, or its ``text`` parts."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                text = part.get("text")
                if isinstance(text, str):
                    out.append(text)
    return out


def openai_user_words(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """``(origin, text)`` of every user, system and developer message of a chat request."""
    out: list[tuple[str, str]] = []
    messages = doc.get("messages")
    for m in messages if isinstance(messages, list) else ():
        if not isinstance(m, dict):
            continue
        origin = _OPENAI_ROLES.get(str(m.get("role")))
        if origin is not None:
            out.extend((origin, t) for t in _texts(m.get("content")) if t)
    return out


def anthropic_user_words(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """``(origin, text)`` of the system prompt and the text blocks of user messages."""
    out: list[tuple[str, str]] = [("system", t) for t in _texts(doc.get("system")) if t]
    messages = doc.get("messages")
    for m in messages if isinstance(messages, list) else ():
        if isinstance(m, dict) and m.get("role") == "user":
            out.extend(("user", t) for t in _texts(m.get("content")) if t)
    return out
