"""D13 in process (so its mutants' re-runs are cheap): Host, Origin and Content-Type on every
route, generated; and no client credential relayed upstream unless the operator named it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from fak_core.gateway.upstream import Upstream, UpstreamConfig
from tests.gateway.support import make_kernel

_APP = create_app(GatewayState(make_kernel()), mcp=True)
ROUTES = ["/v1/fak/adjudicate", "/v1/fak/admit", "/v1/fak/trace/reset", "/v1/fak/syscall", "/mcp"]
LOOPBACK = ["127.0.0.1", "localhost", "[::1]", "LOCALHOST"]
#: Host names an attacker's DNS may point at 127.0.0.1 (rebinding), and look-alikes.
FOREIGN = st.one_of(
    st.sampled_from(
        [
            "evil.example",
            "127.0.0.1.evil.example",
            "localhost.evil",
            "127.0.0.2",
            "0.0.0.0",
            "[::2]",
        ]
    ),
    st.from_regex(r"[a-z][a-z0-9-]{0,20}\.(com|net|io|test)", fullmatch=True),
)
PORT = st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}"))
MEDIA = st.sampled_from(
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/json",
        "",
    ]
)


def _post(
    client: TestClient, route: str, headers: dict[str, str], content: bytes | None = None
) -> int:
    body = content if content is not None else b'{"tool": "echo", "trace_id": "t-h"}'
    return client.post(
        route, content=body, headers={"content-type": "application/json", **headers}
    ).status_code


@pytest.mark.fak_theorem("D13")
@given(st.sampled_from(ROUTES), FOREIGN, PORT)
def test_a_foreign_host_is_421_on_every_route(route: str, host: str, port: str) -> None:
    with TestClient(_APP, base_url="http://127.0.0.1") as c:
        assert _post(c, route, {"host": host + port}) == 421


@pytest.mark.fak_theorem("D13")
@given(st.sampled_from(ROUTES), FOREIGN, PORT, st.sampled_from(["http", "https"]))
def test_a_cross_site_origin_is_403_on_every_route(
    route: str, host: str, port: str, scheme: str
) -> None:
    with TestClient(_APP, base_url="http://127.0.0.1") as c:
        assert _post(c, route, {"origin": f"{scheme}://{host}{port}"}) == 403
        assert _post(c, route, {"origin": "null"}) == 403


@pytest.mark.fak_theorem("D13")
@given(st.sampled_from(ROUTES), MEDIA)
def test_a_post_body_that_is_not_json_is_415_on_every_route(route: str, media: str) -> None:
    with TestClient(_APP, base_url="http://127.0.0.1") as c:
        r = c.post(
            route, content=b'{"tool": "echo", "trace_id": "t-h"}', headers={"content-type": media}
        )
        assert r.status_code == 415


@pytest.mark.fak_theorem("D13")
@given(st.sampled_from(LOOPBACK), PORT)
def test_loopback_hosts_and_origins_are_served(host: str, port: str) -> None:
    with TestClient(_APP, base_url="http://127.0.0.1") as c:
        headers = {"host": host + port, "origin": f"http://{host}{port}"}
        assert _post(c, "/v1/fak/adjudicate", headers) == 200


CREDENTIALS = st.dictionaries(
    st.sampled_from(
        ["authorization", "x-api-key", "cookie", "x-goog-api-key", "proxy-authorization"]
    ),
    st.from_regex(r"[A-Za-z0-9 _-]{8,30}", fullmatch=True),
    min_size=1,
)


@pytest.mark.fak_theorem("D13")
@given(CREDENTIALS, st.sampled_from(["openai", "anthropic"]), st.booleans())
def test_no_client_credential_goes_upstream_unless_named(
    creds: dict[str, str], wire: str, pinned: bool
) -> None:
    up = Upstream(
        UpstreamConfig(base_url="http://up.invalid/v1", api_key="pinned-key" if pinned else None)
    )
    sent = up.headers(wire, creds)  # type: ignore[arg-type]
    for value in creds.values():
        assert value not in sent.values()
    named = Upstream(
        UpstreamConfig(base_url="http://up.invalid/v1", forward_headers=tuple(creds))
    ).headers(wire, creds)  # type: ignore[arg-type]
    for name, value in creds.items():
        assert named[name] == value
