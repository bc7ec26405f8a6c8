"""Official SDK clients pointed at a test gateway; every one is closed after its test.

Each sends the test run's session token (:data:`SESSION`) in its default headers, as a
real SDK client of the gateway does (``X-Fak-Session``, a secret of its own): every
client of a run is the same user, so a later turn on a trace an earlier one opened is let
through. A test of another user passes its own ``X-Fak-Session`` in ``extra_headers``.
"""

from __future__ import annotations

import secrets
from typing import Any

import anthropic
import openai

_OPEN: list[Any] = []
#: The session token every SDK client of this test run sends.
SESSION = secrets.token_urlsafe(24)
HEADERS = {"X-Fak-Session": SESSION}


def openai_client(url: str, key: str = "sk-client") -> openai.OpenAI:
    c = openai.OpenAI(
        base_url=url + "/v1", api_key=key, max_retries=0, timeout=10, default_headers=HEADERS
    )
    _OPEN.append(c)
    return c


def anthropic_client(url: str, key: str = "ak-client") -> anthropic.Anthropic:
    c = anthropic.Anthropic(
        base_url=url, api_key=key, max_retries=0, timeout=10, default_headers=HEADERS
    )
    _OPEN.append(c)
    return c


def close_all() -> None:
    while _OPEN:
        _OPEN.pop().close()
