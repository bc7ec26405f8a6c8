"""Official SDK clients pointed at a test gateway; every one is closed after its test."""

from __future__ import annotations

from typing import Any

import anthropic
import openai

_OPEN: list[Any] = []


def openai_client(url: str, key: str = "sk-client") -> openai.OpenAI:
    c = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=10)
    _OPEN.append(c)
    return c


def anthropic_client(url: str, key: str = "ak-client") -> anthropic.Anthropic:
    c = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0, timeout=10)
    _OPEN.append(c)
    return c


def close_all() -> None:
    while _OPEN:
        _OPEN.pop().close()
