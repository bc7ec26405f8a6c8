"""The fak-native HTTP API in-process (Starlette TestClient): every route and error code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from fak_core.taint import Taint
from tests.gateway.support import POLICY_DOC, make_kernel, own_session

JSON = {"content-type": "application/json"}


@pytest.fixture
def client(state: GatewayState) -> Iterator[TestClient]:
    with TestClient(create_app(state), base_url="http://127.0.0.1", headers=own_session()) as c:
        yield c


def assert_envelope(resp: Any, status: int, type_: str, *, contains: str = "") -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "code", "param"}
    assert err["type"] == type_
    assert contains.lower() in err["message"].lower()
    assert resp.headers.get("x-trace-id")
    return dict(err)


# ----------------------------------------------------------------------------- decisions
def test_adjudicate_allow_echoes_body_trace_in_body_and_header(client: TestClient) -> None:
    r = client.post(
        "/v1/fak/adjudicate",
        json={"tool": "get_user_details", "arguments": {"user_id": "u1"}, "trace_id": "t-body"},
        headers={"X-Trace-Id": "t-header"},
    )
    assert r.status_code == 200
    body = r.json()
    assert body == {"verdict": {"kind": "ALLOW", "by": "floor"}, "trace_id": "t-body"}
    assert r.headers["x-trace-id"] == "t-body"


def test_header_trace_used_when_body_has_none(client: TestClient) -> None:
    r = client.post("/v1/fak/adjudicate", json={"tool": "echo"}, headers={"X-Trace-Id": "hdr-7"})
    assert r.json()["trace_id"] == "hdr-7"
    assert r.headers["x-trace-id"] == "hdr-7"


def test_trace_is_minted_when_absent(client: TestClient) -> None:
    a = client.post("/v1/fak/adjudicate", json={"tool": "echo"})
    b = client.post("/v1/fak/adjudicate", json={"tool": "echo"})
    ta, tb = a.json()["trace_id"], b.json()["trace_id"]
    assert ta.startswith("gw-")
    assert tb.startswith("gw-")
    assert ta != tb
    assert a.headers["x-trace-id"] == ta


@pytest.mark.fak_theorem("D10.3")
def test_deny_is_a_200_value_not_a_5xx(client: TestClient) -> None:
    r = client.post("/v1/fak/adjudicate", json={"tool": "shell_rm_rf", "arguments": "{}"})
    assert r.status_code == 200
    assert r.json()["verdict"] == {
        "kind": "DENY",
        "reason": "POLICY_BLOCK",
        "by": "floor",
        "disposition": "TERMINAL",
        "detail": {"claim": "policy denies tool shell_rm_rf"},
    }


@pytest.mark.fak_theorem("D10.3")
def test_unknown_tool_is_default_deny(client: TestClient) -> None:
    r = client.post("/v1/fak/syscall", json={"tool": "frobnicate"})
    assert r.status_code == 200
    v = r.json()["verdict"]
    assert (v["kind"], v["reason"]) == ("DENY", "DEFAULT_DENY")
    assert r.json()["result"]["status"] == "ERROR"


def test_arguments_as_json_string_and_malformed_args_are_verdicts(client: TestClient) -> None:
    ok = client.post("/v1/fak/adjudicate", json={"tool": "echo", "arguments": '{"a": 1}'})
    assert ok.json()["verdict"]["kind"] == "ALLOW"
    bad = client.post("/v1/fak/adjudicate", json={"tool": "echo", "arguments": "{bad"})
    assert bad.status_code == 200
    v = bad.json()["verdict"]
    assert (v["kind"], v["reason"], v["by"]) == ("DENY", "MALFORMED", "preflight")
    arr = client.post("/v1/fak/adjudicate", json={"tool": "echo", "arguments": [1, 2]})
    assert arr.json()["verdict"]["reason"] == "MALFORMED"


def test_transform_returns_repaired_arguments(client: TestClient) -> None:
    r = client.post(
        "/v1/fak/adjudicate",
        json={"tool": "get_user_details", "arguments": {"user_id": "u", "password": "hunter2"}},
    )
    body = r.json()
    assert body["verdict"]["kind"] == "TRANSFORM"
    assert json.loads(body["repaired_arguments"]) == {"user_id": "u"}


def test_syscall_runs_the_tool_and_returns_its_result(client: TestClient) -> None:
    r = client.post("/v1/fak/syscall", json={"tool": "echo", "arguments": {"x": 1}})
    body = r.json()
    assert body["verdict"]["kind"] == "ALLOW"
    assert body["result"]["status"] == "OK"
    assert json.loads(body["result"]["content"]) == {"echo": {"x": 1}}


@pytest.mark.fak_theorem("D10.3")
def test_require_witness_adjudicates_escalate_and_syscall_fails_closed(client: TestClient) -> None:
    adj = client.post("/v1/fak/adjudicate", json={"tool": "wire_money"}).json()["verdict"]
    assert (adj["kind"], adj["disposition"]) == ("REQUIRE_WITNESS", "ESCALATE")
    assert adj["detail"]["claim"]
    sys_ = client.post("/v1/fak/syscall", json={"tool": "wire_money"}).json()
    assert (sys_["verdict"]["kind"], sys_["verdict"]["reason"]) == ("DENY", "UNWITNESSED")
    assert sys_["result"]["status"] == "ERROR"


def test_admit_taints_the_session_then_egress_is_denied_then_reset(
    client: TestClient, state: GatewayState
) -> None:
    trace = "sess-admit"
    email = {"tool": "send_email", "arguments": {"to": "x@example.com"}, "trace_id": trace}
    first = client.post("/v1/fak/adjudicate", json=email)
    assert first.json()["verdict"]["kind"] == "ALLOW"
    # The first request on a trace claims it and is handed the session's token.
    own = {"X-Fak-Session": first.headers["x-fak-session"]}
    before = client.get(f"/v1/fak/trace/{trace}", headers=own).json()
    assert before == {"trace_id": trace, "taint": "trusted", "dangerous": False}

    r = client.post(
        "/v1/fak/admit",
        json={"tool": "fetch_url", "result": {"page": "hello"}, "trace_id": trace},
    )
    assert r.status_code == 200
    assert r.json()["result"]["status"] == "OK"
    after = client.get(f"/v1/fak/trace/{trace}", headers=own).json()
    assert after == {"trace_id": trace, "taint": "tainted", "dangerous": True}
    assert state.kernel.taint(trace) is Taint.TAINTED

    tainted = client.post("/v1/fak/adjudicate", json=email).json()["verdict"]
    assert (tainted["kind"], tainted["reason"]) == ("DENY", "TRUST_VIOLATION")

    reset = client.post("/v1/fak/trace/reset", json={"trace_id": trace}, headers=own)
    assert reset.json() == {"reset": True, "trace_id": trace}
    assert client.get(f"/v1/fak/trace/{trace}", headers=own).json()["taint"] == "trusted"
    assert client.post("/v1/fak/adjudicate", json=email).json()["verdict"]["kind"] == "ALLOW"


def test_admit_quarantines_a_secret_shaped_result(client: TestClient) -> None:
    secret = "key sk-" + "A" * 30
    r = client.post("/v1/fak/admit", json={"tool": "fetch_url", "result": secret, "trace_id": "q1"})
    body = r.json()
    assert body["verdict"]["kind"] == "QUARANTINE"
    assert secret not in body["result"]["content"]
    own = {"X-Fak-Session": r.headers["x-fak-session"]}
    assert client.get("/v1/fak/trace/q1", headers=own).json()["taint"] == "quarantined"


def test_principal_header_beats_body(state: GatewayState) -> None:
    seen: list[str] = []
    state.kernel.subscribe(lambda ev: seen.append(ev.call.principal))
    with TestClient(create_app(state), base_url="http://127.0.0.1", headers=own_session()) as c:
        c.post(
            "/v1/fak/adjudicate",
            json={"tool": "echo", "principal": "body"},
            headers={"X-Fak-Principal": "header"},
        )
        c.post("/v1/fak/adjudicate", json={"tool": "echo", "principal": "body"})
    assert seen == ["header", "body"]


# ----------------------------------------------------------------------------- 400s
@pytest.mark.parametrize(
    ("content", "needle", "param"),
    [
        (b"{not json", "malformed request body", None),
        (b"", "empty request body", None),
        (b"[1, 2]", "must be a json object", None),
        (b'"tool"', "must be a json object", None),
        (b"{}", "missing tool name", "tool"),
        (b'{"tool": "   "}', "missing tool name", "tool"),
        (b'{"tool": 7}', "'tool' must be a string", "tool"),
        (b'{"tool": "echo", "trace_id": 3}', "'trace_id' must be a string", "trace_id"),
        (b'{"tool": "echo", "read_only": "yes"}', "'read_only' must be true or false", None),
    ],
)
@pytest.mark.parametrize("route", ["/v1/fak/adjudicate", "/v1/fak/syscall", "/v1/fak/admit"])
@pytest.mark.fak_theorem("D10.3")
def test_bad_bodies_are_400_saying_what_to_fix(
    client: TestClient, route: str, content: bytes, needle: str, param: str | None
) -> None:
    r = client.post(route, content=content, headers={"content-type": "application/json"})
    err = assert_envelope(r, 400, "invalid_request_error", contains=needle)
    assert err["param"] == param


def test_trace_reset_needs_a_trace_id(client: TestClient) -> None:
    for body in ({}, {"trace_id": ""}, {"trace_id": "  "}):
        r = client.post("/v1/fak/trace/reset", json=body)
        assert_envelope(r, 400, "invalid_request_error", contains="trace_id")


def test_wrong_method_is_405_envelope(client: TestClient) -> None:
    r = client.get("/v1/fak/adjudicate")
    assert_envelope(r, 405, "invalid_request_error", contains="use POST")
    assert "POST" in r.headers["allow"]
    r = client.delete("/healthz")
    assert_envelope(r, 405, "invalid_request_error", contains="GET")


def test_unknown_route_is_404_envelope(client: TestClient) -> None:
    assert_envelope(client.get("/v1/nope"), 404, "invalid_request_error", contains="/v1/nope")
    assert_envelope(client.post("/v1/fak/frob", json={}), 404, "invalid_request_error")


# ----------------------------------------------------------------------------- body cap
def test_body_over_cap_by_content_length_is_413(state: GatewayState) -> None:
    state.max_body = 1024
    with TestClient(create_app(state), base_url="http://127.0.0.1", headers=own_session()) as c:
        big = {"tool": "echo", "arguments": {"blob": "x" * 2000}}
        r = c.post("/v1/fak/adjudicate", json=big)
        assert_envelope(r, 413, "invalid_request_error", contains="1024 bytes")
        small = c.post("/v1/fak/adjudicate", json={"tool": "echo"})
        assert small.status_code == 200


def test_chunked_body_over_cap_is_413(state: GatewayState) -> None:
    state.max_body = 1024

    def chunks() -> Iterator[bytes]:
        yield b'{"tool": "echo", "arguments": {"blob": "'
        for _ in range(10):
            yield b"y" * 200
        yield b'"}}'

    with TestClient(create_app(state), base_url="http://127.0.0.1", headers=own_session()) as c:
        r = c.post("/v1/fak/adjudicate", content=chunks(), headers=JSON)
        assert "content-length" not in r.request.headers  # really chunked
        assert_envelope(r, 413, "invalid_request_error", contains="limit")

        def small() -> Iterator[bytes]:
            yield b'{"tool": '
            yield b'"echo"}'

        ok = c.post("/v1/fak/adjudicate", content=small(), headers=JSON)
        assert ok.status_code == 200
        assert ok.json()["verdict"]["kind"] == "ALLOW"


def test_bad_content_length_is_400(client: TestClient) -> None:
    r = client.post("/v1/fak/adjudicate", content=b"{}", headers={"content-length": "abc"})
    assert r.status_code == 400


# ----------------------------------------------------------------------------- auth
def _route_ok(request: Request) -> Response:
    return Response("proxied", media_type="text/plain")


@pytest.fixture
def authed(state: GatewayState) -> Iterator[TestClient]:
    extra = [Route("/v1/chat/completions", _route_ok, methods=["POST"])]
    with TestClient(
        create_app(state, api_key="s3cret-key", extra_routes=extra), base_url="http://127.0.0.1"
    ) as c:
        yield c


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic s3cret-key"},
        {"Authorization": "Bearer "},
        {"X-Api-Key": "s3cret-ke"},
        {"X-Api-Key": "s3cret-key-and-more"},
    ],
)
@pytest.mark.parametrize(
    "path", ["/v1/fak/adjudicate", "/v1/chat/completions", "/v1/models", "/openapi.json"]
)
def test_missing_or_wrong_key_is_401_everywhere(
    authed: TestClient, headers: dict[str, str], path: str
) -> None:
    method = "GET" if path in ("/v1/models", "/openapi.json") else "POST"
    r = authed.request(method, path, json={"tool": "echo"}, headers=headers)
    assert_envelope(r, 401, "authentication_error", contains="credentials")


@pytest.mark.parametrize(
    "headers", [{"Authorization": "Bearer s3cret-key"}, {"X-Api-Key": "s3cret-key"}]
)
def test_right_key_passes_including_extra_routes(
    authed: TestClient, headers: dict[str, str]
) -> None:
    r = authed.post("/v1/fak/adjudicate", json={"tool": "echo"}, headers=headers)
    assert r.status_code == 200
    assert r.json()["verdict"]["kind"] == "ALLOW"
    assert authed.post("/v1/chat/completions", headers=headers).text == "proxied"


def test_healthz_is_exempt_from_auth(authed: TestClient) -> None:
    r = authed.get("/healthz")
    assert r.status_code == 200
    assert r.json()["ok"] is True


def test_empty_api_key_is_refused(state: GatewayState) -> None:
    with pytest.raises(ValueError, match="empty"):
        create_app(state, api_key="")


# ----------------------------------------------------------------------------- 500s
def _boom(request: Request) -> Response:
    raise RuntimeError("kaboom")


def test_exception_in_any_handler_is_a_clean_500(state: GatewayState) -> None:
    app = create_app(state, extra_routes=[Route("/boom", _boom)])
    with TestClient(
        app, raise_server_exceptions=False, base_url="http://127.0.0.1", headers=own_session()
    ) as c:
        r = c.get("/boom", headers={"X-Trace-Id": "t-500"})
    err = assert_envelope(r, 500, "server_error", contains="t-500")
    assert "kaboom" not in err["message"]  # internals are logged, not leaked
    assert r.headers["x-trace-id"] == "t-500"


class ExplodingState(GatewayState):
    """A seam that fails while deciding, on the path the native routes take."""

    async def decide_async(self, call: Any) -> Any:
        raise RuntimeError("seam failure")


def test_exception_inside_the_seam_is_a_500_not_an_allow() -> None:
    app = create_app(ExplodingState(make_kernel()))
    with TestClient(
        app, raise_server_exceptions=False, base_url="http://127.0.0.1", headers=own_session()
    ) as c:
        r = c.post("/v1/fak/adjudicate", json={"tool": "echo"})
    assert_envelope(r, 500, "server_error")


# ----------------------------------------------------------------------------- policy reload
def test_policy_reload_good_then_bad(state: GatewayState, policy_file: Path) -> None:
    with TestClient(
        create_app(state, policy_path=policy_file),
        base_url="http://127.0.0.1",
        headers=own_session(),
    ) as c:
        assert c.post("/v1/fak/adjudicate", json={"tool": "echo"}).json()["verdict"]["kind"] == (
            "ALLOW"
        )
        doc = {**POLICY_DOC, "deny": {**POLICY_DOC["deny"], "echo": "POLICY_BLOCK"}}
        policy_file.write_text(json.dumps(doc), encoding="utf-8")
        r = c.post("/v1/fak/policy/reload")
        assert r.status_code == 200
        body = r.json()
        assert body["reloaded"] is True
        assert body["source"] == str(policy_file)
        assert body["digest"].startswith("sha256:")
        assert len(body["digest"]) == 71
        v = c.post("/v1/fak/adjudicate", json={"tool": "echo"}).json()["verdict"]
        assert (v["kind"], v["reason"]) == ("DENY", "POLICY_BLOCK")

        policy_file.write_text('{"allow": ["echo"], "no_such_key": 1}', encoding="utf-8")
        bad = c.post("/v1/fak/policy/reload")
        assert_envelope(bad, 400, "invalid_request_error", contains="no_such_key")
        # the previous policy stays active
        v = c.post("/v1/fak/adjudicate", json={"tool": "echo"}).json()["verdict"]
        assert v["reason"] == "POLICY_BLOCK"
        healthz = c.get("/healthz").json()
        assert healthz["policy_digest"] == body["digest"]

        policy_file.write_text("{not json", encoding="utf-8")
        assert_envelope(
            c.post("/v1/fak/policy/reload"), 400, "invalid_request_error", contains="JSON"
        )


def test_policy_reload_without_a_file_is_404(client: TestClient) -> None:
    assert_envelope(
        client.post("/v1/fak/policy/reload"), 404, "invalid_request_error", contains="--policy"
    )


# ----------------------------------------------------------------------------- misc routes
def test_healthz_and_models(state: GatewayState) -> None:
    app = create_app(state, models=("fak-scripted",), health={"planner": "scripted"})
    with TestClient(app, base_url="http://127.0.0.1", headers=own_session()) as c:
        h = c.get("/healthz")
        assert h.status_code == 200
        assert h.json()["ok"] is True
        assert h.json()["planner"] == "scripted"
        assert h.json()["tools"] == 2
        assert h.headers["x-trace-id"]
        m = c.get("/v1/models").json()
        assert m == {
            "object": "list",
            "data": [{"id": "fak-scripted", "object": "model", "owned_by": "fak"}],
        }


def test_openapi_document_is_valid_and_covers_every_route(client: TestClient) -> None:
    from openapi_spec_validator import validate

    doc = client.get("/openapi.json").json()
    validate(doc)
    assert doc["openapi"].startswith("3.1")
    app_paths = {
        r.path.replace("{trace_id:str}", "{trace_id}")
        for r in client.app.routes  # type: ignore[attr-defined]
        if isinstance(r, Route) and r.path != "/mcp"
    }
    assert app_paths == set(doc["paths"])
    for path, item in doc["paths"].items():
        for op in item.values():
            assert "200" in op["responses"], path
            assert {"401", "405", "413", "500"} <= set(op["responses"]), path


# --------------------------------------------------------------- blank, as the spec says
@pytest.mark.parametrize(
    ("text", "blank"),
    [
        ("\x1c", False),  # Python's str.strip() takes these; ECMA-262 \s (the spec's) does not
        ("\x1f\x85", False),
        ("\ufeff", True),  # ECMA-262 \s takes it; str.strip() does not
        (" \u3000\u2028\t", True),
    ],
)
def test_blank_means_what_the_openapi_pattern_means(
    client: TestClient, text: str, blank: bool
) -> None:
    """``tool`` and a required ``trace_id`` are ``pattern: \\S`` in /openapi.json, an
    ECMA-262 pattern: a name the spec accepts must not be refused as blank, nor the reverse.
    (Found by schemathesis: ``tool`` of \\x1c was schema-valid and answered 400.)"""
    r = client.post("/v1/fak/adjudicate", json={"tool": text})
    if blank:
        assert_envelope(r, 400, "invalid_request_error")
    else:
        assert r.status_code == 200
        assert r.json()["verdict"]["kind"] == "DENY"  # an unknown tool: a verdict, not a 400
    own = {"X-Fak-Session": r.headers.get("x-fak-session", "")} if not blank else {}
    reset = client.post("/v1/fak/trace/reset", json={"trace_id": text}, headers=own)
    assert reset.status_code == (400 if blank else 403)  # the tool's request minted the trace
    if not blank:  # the trace named in the body: its first request claims it
        claim = client.post("/v1/fak/adjudicate", json={"tool": "echo", "trace_id": text})
        own = {"X-Fak-Session": claim.headers["x-fak-session"]}
        reset = client.post("/v1/fak/trace/reset", json={"trace_id": text}, headers=own)
        assert reset.status_code == 200, reset.text
