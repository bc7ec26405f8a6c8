"""The upstream hop itself: no state shared between clients, the environment's proxy,
and transport failures mapped to the status the gateway answers with."""

from __future__ import annotations

from typing import Any

import aiohttp
import httpx
import pytest

from fak_core.gateway.upstream import env_proxy, transport_error

from .clients import openai_client
from .scripted_upstream import Script, ScriptedUpstream


def test_a_cookie_the_upstream_sets_never_reaches_another_turn(
    make_gateway: Any, upstream: ScriptedUpstream, upstream_url: str
) -> None:
    # by host name: cookie jars refuse cookies from bare IP addresses, which would hide a jar
    gateway = make_gateway(
        base_url=upstream_url.replace("127.0.0.1", "localhost") + "/v1",
        forward_headers=("authorization",),
    )
    upstream.reset(Script(text="hi", cookie="session=alice-secret"))
    first = httpx.post(
        gateway.url + "/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "a"}]},
    )
    assert first.status_code == 200
    upstream.reset(Script(text="hi"))
    client = openai_client(gateway.url, key="sk-bob")
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}])
    (seen,) = upstream.requests
    assert "cookie" not in seen.headers
    assert seen.headers["authorization"] == "Bearer sk-bob"


def test_env_proxy_reads_the_environment_and_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy(httpx.URL("https://api.openai.com/v1")) is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "models.internal")
    found = env_proxy(httpx.URL("https://api.openai.com/v1"))
    assert found is not None and str(found.url) == "http://proxy.internal:3128"
    assert env_proxy(httpx.URL("https://models.internal/v1")) is None
    assert env_proxy(httpx.URL("http://api.openai.com/v1")) is None  # no HTTP_PROXY set


def _timeout_cause() -> httpx.ConnectTimeout:
    exc = httpx.ConnectTimeout("slow")
    exc.__cause__ = aiohttp.ServerTimeoutError("connect timed out")
    return exc


def _refused_cause() -> httpx.ConnectTimeout:
    # httpx-aiohttp files every aiohttp connection error under ConnectTimeout
    exc = httpx.ConnectTimeout("refused")
    exc.__cause__ = ConnectionRefusedError(111, "Connection refused")
    return exc


def _disconnect_cause() -> httpx.ConnectTimeout:
    exc = httpx.ConnectTimeout("gone")
    exc.__cause__ = aiohttp.ServerDisconnectedError()
    return exc


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (_timeout_cause(), 504, "upstream_timeout"),
        (_refused_cause(), 502, "upstream_unreachable"),
        (_disconnect_cause(), 502, "upstream_error"),
        (httpx.ReadTimeout("slow"), 504, "upstream_timeout"),
        (TimeoutError(), 504, "upstream_timeout"),
        (httpx.ConnectError("refused"), 502, "upstream_unreachable"),
        (httpx.ReadError("reset"), 502, "upstream_error"),
        (RuntimeError("anything else"), 502, "upstream_error"),
    ],
    ids=[
        "timeout",
        "refused",
        "disconnected",
        "read-timeout",
        "asyncio-timeout",
        "connect-error",
        "read-error",
        "other",
    ],
)
def test_transport_failures_map_to_the_gateway_status(
    exc: BaseException, status: int, code: str
) -> None:
    err = transport_error(exc)
    assert (err.status, err.code) == (status, code)
