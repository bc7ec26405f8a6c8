"""``fak serve`` on loopback (real sockets, a real process): sessions, Host/Origin and
content type, credential forwarding and the tool-result cap, through the official OpenAI
SDK where it applies and raw httpx otherwise (D12, D13)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest

from pytest_fak.fixtures import serve_app
from tests.gateway_proxies.scripted_upstream import Script, ScriptedUpstream

LINE = re.compile(r"^fak serve: listening on (http://127\.0\.0\.1:\d+) ")
ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@contextmanager
def fak_serve(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fak_core.gateway.cli", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd(), **(env or {})},
    )
    try:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(30)
        m = LINE.match(box[0] if box else "")
        assert m, f"no start-up line: {box} {proc.stderr.read() if proc.poll() is not None else ''}"  # type: ignore[union-attr]
        yield m.group(1)
    finally:
        proc.terminate()
        proc.wait(20)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[ScriptedUpstream, str]]:
    up = ScriptedUpstream()
    with serve_app(up.app) as url:
        yield up, url


@pytest.mark.fak_theorem("D12")
def test_a_proxied_session_belongs_to_its_client(upstream: tuple[ScriptedUpstream, str]) -> None:
    up, url = upstream
    up.reset(Script(text="hi"))
    with fak_serve(
        "--upstream", url + "/v1", "--operator-key-env", "OPK", env={"OPK": "op-key-0123456789"}
    ) as gw:
        client = openai.OpenAI(base_url=gw + "/v1", api_key="sk-x", max_retries=0)
        raw = client.chat.completions.with_raw_response.create(**ASK)  # type: ignore[call-overload]
        trace, token = raw.headers["x-trace-id"], raw.headers["x-fak-session"]
        assert re.fullmatch(r"gw-[A-Za-z0-9_-]{22,}", trace)
        other = client.chat.completions.with_raw_response.create(**ASK)  # type: ignore[call-overload]
        assert other.headers["x-trace-id"] != trace
        theirs = {"X-Fak-Session": other.headers["x-fak-session"]}
        # Another client, even one that knows the trace id, can neither read nor reset it.
        for headers in ({}, theirs):
            r = httpx.post(gw + "/v1/fak/trace/reset", json={"trace_id": trace}, headers=headers)
            assert r.status_code == 403, r.text
            assert httpx.get(f"{gw}/v1/fak/trace/{trace}", headers=headers).status_code == 403
        own = {"X-Fak-Session": token}
        assert httpx.get(f"{gw}/v1/fak/trace/{trace}", headers=own).json()["taint"] == "trusted"
        op = {"X-Fak-Operator-Key": "op-key-0123456789"}
        assert (
            httpx.post(gw + "/v1/fak/trace/reset", json={"trace_id": trace}, headers=op).status_code
            == 200
        )
        limits = httpx.get(gw + "/healthz").json()["limits"]
        assert limits["session_refusals"] == 4
        assert limits["max_tool_results"] == 256


@pytest.mark.fak_theorem("D13")
def test_rebinding_cross_site_and_text_plain_are_refused_on_every_route() -> None:
    with fak_serve() as gw:
        port = gw.rsplit(":", 1)[1]
        routes = [
            "/v1/fak/adjudicate",
            "/v1/fak/trace/reset",
            "/v1/fak/admit",
            "/v1/chat/completions",
        ]
        for route in routes:
            body = {"tool": "echo", "trace_id": "t"} if "fak" in route else ASK
            rebound = httpx.post(gw + route, json=body, headers={"Host": f"evil.example:{port}"})
            assert rebound.status_code == 421, (route, rebound.text)
            assert "--allowed-hosts" in rebound.json()["error"]["message"]
            cross = httpx.post(gw + route, json=body, headers={"Origin": "https://evil.example"})
            assert cross.status_code == 403, (route, cross.text)
            plain = httpx.post(
                gw + route, content=b'{"trace_id": "t"}', headers={"Content-Type": "text/plain"}
            )
            assert plain.status_code == 415, (route, plain.text)
            assert "application/json" in plain.json()["error"]["message"]
        same = httpx.post(
            gw + "/v1/fak/adjudicate",
            json={"tool": "echo"},
            headers={"Origin": f"http://localhost:{port}"},
        )
        assert same.status_code == 200
        assert httpx.get(gw + "/healthz", headers={"Host": "evil.example"}).status_code == 421
    with fak_serve("--allowed-hosts", "gw.internal") as gw:
        named = httpx.post(
            gw + "/v1/fak/adjudicate", json={"tool": "echo"}, headers={"Host": "gw.internal"}
        )
        assert named.status_code == 200


@pytest.mark.fak_theorem("D13")
def test_the_gateway_key_is_not_forwarded_upstream(upstream: tuple[ScriptedUpstream, str]) -> None:
    up, url = upstream
    up.reset(Script(text="hi"))
    with fak_serve(
        "--upstream", url + "/v1", "--api-key-env", "GWKEY", env={"GWKEY": "gw-secret-key"}
    ) as gw:
        client = openai.OpenAI(base_url=gw + "/v1", api_key="gw-secret-key", max_retries=0)
        client.chat.completions.create(**ASK)  # type: ignore[call-overload]
        seen = up.requests[-1].headers
        assert not any("gw-secret-key" in v for v in seen.values()), seen


def test_too_many_tool_results_is_a_413_naming_the_flag(
    upstream: tuple[ScriptedUpstream, str],
) -> None:
    up, url = upstream
    up.reset(Script(text="hi"))
    call = {"id": "c{}", "type": "function", "function": {"name": "fetch_url", "arguments": "{}"}}
    messages: list[dict[str, object]] = [{"role": "user", "content": "go"}]
    for i in range(5):
        messages.append({"role": "assistant", "tool_calls": [{**call, "id": f"c{i}"}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "ok"})
    with fak_serve("--upstream", url + "/v1", "--max-tool-results", "4") as gw:
        client = openai.OpenAI(base_url=gw + "/v1", api_key="sk-x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as err:
            client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
        assert err.value.status_code == 413
        assert "--max-tool-results" in str(err.value)
        client.chat.completions.create(model="m", messages=messages[:9])  # type: ignore[arg-type]
        assert httpx.get(gw + "/healthz").json()["limits"]["tool_results_refused"] == 1
