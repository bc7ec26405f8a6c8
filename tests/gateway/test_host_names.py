"""D13 at the edges of a host name: where the gateway listens, and what a Host names.

Which names a gateway answers for follows from where it is bound and ``--allowed-hosts``:
bound to a loopback address or name (any of 127.0.0.0/8, ``::1`` with or without brackets,
``localhost``) it answers for the loopback names only; bound anywhere else with no
``--allowed-hosts`` it checks no Host (it cannot know its public names); given
``--allowed-hosts``, exactly those names (case, port and IPv6 brackets aside). A Host is one
of those names only as ``name`` or ``name:digits`` (``[v6]`` or ``[v6]:digits``); a port
that is not a number, or a name glued to other characters, is another name: 421. A POST
body is JSON only when its media type, parameters and case aside, is ``application/json``.
The tables are written here by hand from RFC 3986 (host, port), RFC 5735/4291 (loopback)
and RFC 8259 (the media type); the app is driven in process.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from tests.gateway.support import make_kernel, own_session

BODY = b'{"tool": "echo", "trace_id": "t-names"}'
JSON_CT = ("content-type", "application/json")
LOOPBACK_BINDS = ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "[::1]", "localhost"]
OTHER_BINDS = ["0.0.0.0", "::", "192.0.2.7", "[2001:db8::1]", "gw.example", "localhost.example"]
#: What a foreign Host is (a rebinding name) for these checks.
FOREIGN = "rebind.example"


def _app(bind: str, allowed: list[str] | None = None) -> Any:
    return create_app(
        GatewayState(make_kernel()), mcp=False, host=bind, allowed_hosts=allowed or ()
    )


def _status(client: TestClient, host: str, content_type: str = "application/json") -> int:
    headers = [("host", host), ("content-type", content_type)]
    return client.post("/v1/fak/adjudicate", content=BODY, headers=headers).status_code


@pytest.mark.fak_theorem("D13")
def test_where_the_gateway_listens_decides_which_hosts_it_checks() -> None:
    for bind in LOOPBACK_BINDS + OTHER_BINDS:
        with TestClient(_app(bind), base_url="http://127.0.0.1", headers=own_session()) as c:
            assert _status(c, "127.0.0.1:8080") == 200, bind
            assert _status(c, "localhost") == 200, bind
            want = 421 if bind in LOOPBACK_BINDS else 200
            assert _status(c, FOREIGN) == want, bind
            assert _status(c, "gw.example") == want, bind


ALLOWED = ["GW.Example:8080", "[::1]:9", "[fe80::1]", ":7", "api.test"]
SERVED = ["gw.example", "GW.EXAMPLE:1", "gw.example:65535", "[::1]", "[::1]:80", "[FE80::1]:8"]
SERVED += ["api.test", "Api.Test:443"]


@pytest.mark.fak_theorem("D13")
def test_allowed_hosts_are_names_whatever_their_case_port_or_brackets() -> None:
    with TestClient(
        _app("0.0.0.0", ALLOWED), base_url="http://gw.example", headers=own_session()
    ) as c:
        for host in SERVED:
            assert _status(c, host) == 200, host
        for host in ["", ":7", "127.0.0.1", "localhost", "gw.example.evil", "[::2]", "test"]:
            assert _status(c, host) == 421, host


HOMES = ["localhost", "127.0.0.1"]
GLUE = st.sampled_from(["[", "x", ".", "-", "0"])
BAD_PORTS = st.sampled_from([":abc", ":80x", ":-1", ": 80", ":8o", ":+80", ":0x50"])


@pytest.mark.fak_theorem("D13")
@given(st.sampled_from(HOMES), GLUE, st.sampled_from(["", "x", ".", "]", "1"]), BAD_PORTS)
@example("localhost", "[", "x", ":abc")
def test_a_loopback_name_glued_to_more_or_a_port_that_is_no_number_is_refused(
    home: str, before: str, after: str, port: str
) -> None:
    with TestClient(_app("127.0.0.1"), base_url="http://127.0.0.1", headers=own_session()) as c:
        if (before, after) != ("[", "]"):  # a bracketed name is that name (an IP literal's form)
            assert _status(c, before + home + after) == 421, before + home + after
        assert _status(c, home + after + port) == 421, home + after + port
        assert _status(c, home + port) == 421, home + port


#: Media types of a JSON body (parameters, case and space aside), and ones that are not.
JSON_TYPES = [
    "application/json",
    "Application/JSON",
    "application/json; charset=utf-8",
    " application/json ;charset=UTF-8",
    "APPLICATION/JSON;",
]
NOT_JSON = [
    "application/jsonx",
    "application/json-seq",
    "text/json",
    "application/ld+json",
    "json",
    "charset=utf-8; application/json",
    ";application/json",
]


@pytest.mark.fak_theorem("D13")
def test_a_body_is_json_by_its_media_type_alone() -> None:
    with TestClient(_app("127.0.0.1"), base_url="http://127.0.0.1", headers=own_session()) as c:
        for media in JSON_TYPES:
            assert _status(c, "127.0.0.1", media) == 200, media
        for media in NOT_JSON:
            assert _status(c, "127.0.0.1", media) == 415, media
