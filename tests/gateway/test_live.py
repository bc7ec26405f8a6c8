"""The app on a real socket (uvicorn on 127.0.0.1, port 0) with an httpx client."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
from starlette.applications import Starlette

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState


def test_adjudicate_over_a_real_socket(
    state: GatewayState, live_server: Callable[[Starlette], str]
) -> None:
    url = live_server(create_app(state, api_key="k"))
    with httpx.Client(base_url=url, timeout=10, headers={"X-Api-Key": "k"}) as c:
        r = c.post("/v1/fak/adjudicate", json={"tool": "shell_rm_rf", "trace_id": "live-1"})
        assert r.status_code == 200
        assert r.json()["verdict"]["kind"] == "DENY"
        assert r.headers["x-trace-id"] == "live-1"
        assert c.get("/healthz").json()["ok"] is True
    with httpx.Client(base_url=url, timeout=10) as anon:
        assert anon.post("/v1/fak/adjudicate", json={"tool": "echo"}).status_code == 401
        assert anon.get("/healthz").status_code == 200


def test_chunked_body_over_cap_over_a_real_socket(
    state: GatewayState, live_server: Callable[[Starlette], str]
) -> None:
    state.max_body = 4096
    url = live_server(create_app(state))

    def chunks() -> Iterator[bytes]:
        yield b'{"tool": "echo", "arguments": {"blob": "'
        for _ in range(64):
            yield b"z" * 256
        yield b'"}}'

    with httpx.Client(base_url=url, timeout=10) as c:
        r = c.post(
            "/v1/fak/adjudicate", content=chunks(), headers={"content-type": "application/json"}
        )
        assert r.status_code == 413
        assert r.json()["error"]["code"] == "request_too_large"
    with httpx.Client(base_url=url, timeout=10) as c:  # the server still serves
        assert c.post("/v1/fak/adjudicate", json={"tool": "echo"}).status_code == 200
