"""D13 in process (so its mutants' re-runs are cheap): Host, Origin and Content-Type on every
route, generated; and no client credential relayed upstream unless the operator named it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.middleware import HostOriginMiddleware
from fak_core.gateway.state import GatewayState
from fak_core.gateway.upstream import ANTHROPIC_VERSION, Upstream, UpstreamConfig
from tests.gateway.support import make_kernel, own_session

_APP = create_app(GatewayState(make_kernel()), mcp=True)
#: One client of the module-wide app: every test here is the same user of trace ``t-h``.
_SESSION = own_session()
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


#: status -> (the envelope's code, what its message tells the client to do)
REFUSALS = {
    421: ("invalid_host", "add it with fak serve --allowed-hosts"),
    403: ("invalid_origin", "add the host with fak serve --allowed-hosts"),
    415: ("unsupported_media_type", "must be sent as Content-Type: application/json"),
}


def _refused(r: Any, status: int) -> None:
    """A refusal of ``status`` in the gateway's envelope, saying what to fix."""
    assert r.status_code == status, r.text
    err = r.json()["error"]
    code, says = REFUSALS[status]
    assert err["code"] == code, err
    assert says in err["message"], err


BODY = b'{"tool": "echo", "trace_id": "t-h"}'


def _passed(r: Any) -> None:
    """The request got past the check: whatever the route answered, not a refusal of it
    (nor a 5xx)."""
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        assert r.json()["error"]["code"] not in {code for code, _ in REFUSALS.values()}, r.text


def _send(c: TestClient, route: str, headers: list[tuple[str, str]], body: Any = BODY) -> Any:
    """A POST with exactly these headers (repeats kept, in order) besides the client's own."""
    return c.post(route, content=body, headers=headers)


@pytest.mark.fak_theorem("D13")
@given(st.sampled_from(ROUTES), FOREIGN, PORT, st.sampled_from(LOOPBACK))
def test_a_foreign_host_is_421_on_every_route(route: str, host: str, port: str, home: str) -> None:
    json_ct = ("content-type", "application/json")
    with TestClient(_APP, base_url="http://127.0.0.1", headers=_SESSION) as c:
        _refused(_send(c, route, [json_ct, ("host", host + port)]), 421)
        # a repeated Host is judged by the first, the one the routes read
        _refused(_send(c, route, [json_ct, ("host", host + port), ("host", home)]), 421)
        _passed(_send(c, route, [json_ct, ("host", home + port), ("host", host)]))


@pytest.mark.fak_theorem("D13")
@given(st.sampled_from(ROUTES), FOREIGN, PORT, st.sampled_from(["http", "https"]))
def test_a_cross_site_origin_is_403_on_every_route(
    route: str, host: str, port: str, scheme: str
) -> None:
    json_ct = ("content-type", "application/json")
    home = ("origin", f"{scheme}://127.0.0.1{port}")
    with TestClient(_APP, base_url="http://127.0.0.1", headers=_SESSION) as c:
        _refused(_send(c, route, [json_ct, ("origin", f"{scheme}://{host}{port}")]), 403)
        _refused(_send(c, route, [json_ct, ("origin", "null")]), 403)
        _refused(_send(c, route, [json_ct, ("origin", f"{scheme}://{host}"), home]), 403)
        for origin in (f"ftp://127.0.0.1{port}", f"{scheme}://", "127.0.0.1"):
            _refused(_send(c, route, [json_ct, ("origin", origin)]), 403)


@pytest.mark.fak_theorem("D13")
@given(st.sampled_from(ROUTES), MEDIA)
def test_a_post_body_that_is_not_json_is_415_on_every_route(route: str, media: str) -> None:
    with TestClient(_APP, base_url="http://127.0.0.1", headers=_SESSION) as c:
        _refused(_send(c, route, [("content-type", media)]), 415)
        _refused(_send(c, route, [("content-type", media)], b"{"), 415)  # one byte is a body

        def chunks() -> Any:  # a body of unknown length: Transfer-Encoding: chunked
            yield BODY

        _refused(_send(c, route, [("content-type", media)], chunks()), 415)


@pytest.mark.fak_theorem("D13")
@pytest.mark.parametrize("media", ["text/plain", None])
def test_a_post_without_a_body_needs_no_content_type(media: str | None) -> None:
    headers = [("content-type", media)] if media else []
    with TestClient(_APP, base_url="http://127.0.0.1", headers=_SESSION) as c:
        _passed(_send(c, "/v1/fak/policy/reload", [*headers, ("content-length", "0")], b""))
    # a POST that declares no length at all (no body): the check alone, on a raw scope
    check = HostOriginMiddleware(_APP, ["127.0.0.1"])
    raw = [(b"host", b"127.0.0.1")] + ([(b"content-type", media.encode())] if media else [])
    assert check.refusal({"type": "http", "method": "POST", "headers": raw}) is None
    scope = {"type": "http", "method": "POST", "headers": [*raw, (b"content-length", b"7")]}
    refused = check.refusal(scope)  # with a body, no Content-Type is not JSON either
    assert refused is not None and refused[0] == 415, refused


@pytest.mark.fak_theorem("D13")
def test_an_allowed_host_entry_without_a_name_allows_no_empty_host() -> None:
    app = create_app(
        GatewayState(make_kernel()), mcp=False, allowed_hosts=[":8080", "gw.example:8080"]
    )
    with TestClient(app, base_url="http://gw.example", headers=_SESSION) as c:
        json_ct = ("content-type", "application/json")
        assert _send(c, "/v1/fak/adjudicate", [json_ct]).status_code == 200
        _refused(_send(c, "/v1/fak/adjudicate", [json_ct, ("host", "")]), 421)
        _refused(_send(c, "/v1/fak/adjudicate", [json_ct, ("host", ":8080")]), 421)
        _refused(_send(c, "/v1/fak/adjudicate", [json_ct, ("origin", "http://")]), 403)


@pytest.mark.fak_theorem("D13")
@given(st.sampled_from(LOOPBACK), PORT, st.sampled_from(["http", "https"]))
def test_loopback_hosts_and_origins_are_served(host: str, port: str, scheme: str) -> None:
    with TestClient(_APP, base_url="http://127.0.0.1", headers=_SESSION) as c:
        headers = {"host": host + port, "origin": f"{scheme}://{host}{port}"}
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


#: The relays each wire's client may set (and the gateway passes on), per the wire specs.
RELAYS = {
    "openai": ("openai-organization", "openai-project"),
    "anthropic": ("anthropic-version", "anthropic-beta"),
}


@pytest.mark.fak_theorem("D13")
@given(
    wire=st.sampled_from(["openai", "anthropic"]),
    key=st.sampled_from([None, "", "pinned-key"]),
    relays=st.dictionaries(
        st.sampled_from([*RELAYS["openai"], *RELAYS["anthropic"]]),
        st.sampled_from(["", "v-2024", "beta-x"]),
    ),
    creds=CREDENTIALS,
    forward=st.lists(
        st.sampled_from(["authorization", "x-api-key", "cookie", "X-Trace-Note", "anthropic-beta"]),
        unique=True,
    ),
    note=st.sampled_from(["", "note-1"]),
)
@example(
    wire="openai",
    key="pinned-key",
    relays={"openai-organization": "org-1"},
    creds={"authorization": "Bearer client-key"},
    forward=["authorization"],
    note="",
)
@example(
    wire="anthropic",
    key="pinned-key",
    relays={"anthropic-beta": "beta-x", "anthropic-version": "v-2024"},
    creds={"x-api-key": "client-key"},
    forward=["x-api-key", "X-Trace-Note"],
    note="note-1",
)
def test_the_upstream_headers_are_exactly_the_pinned_key_the_relays_and_the_named(
    wire: str,
    key: str | None,
    relays: dict[str, str],
    creds: dict[str, str],
    forward: list[str],
    note: str,
) -> None:
    """Written from the theorem: the JSON content type, identity encoding, the wire's relays
    the client set (Anthropic's version defaulted), the pinned key in the wire's own header,
    and a header the operator named only where the gateway set none; nothing else."""
    client = {**creds, **relays, "x-trace-note": note}
    config = UpstreamConfig(base_url="http://up.invalid/v1", api_key=key, forward_headers=forward)
    sent = Upstream(config).headers(wire, client)  # type: ignore[arg-type]
    want = {"content-type": "application/json", "accept-encoding": "identity"}
    want.update({n: v for n, v in relays.items() if n in RELAYS[wire] and v})
    if wire == "anthropic":
        want.setdefault("anthropic-version", ANTHROPIC_VERSION)
    if key:
        want["authorization" if wire == "openai" else "x-api-key"] = (
            f"Bearer {key}" if wire == "openai" else key
        )
    for name in forward:
        value = client.get(name.lower())
        if value and name.lower() not in want:
            want[name.lower()] = value
    assert sent == want
