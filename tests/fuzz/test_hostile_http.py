"""Hypothesis-generated hostile request bodies against every POST route, in process.

Raw bytes, not schema-shaped: invalid JSON, invalid UTF-8, JSON of the wrong types, right
fields with wrong types, nesting from shallow to far past every parser's limit, bodies
around the size cap, odd content types. Every answer must be a 4xx error envelope or a 200
(a verdict, for the deciding routes), never a 5xx; no call with arguments that are not a
JSON object is ever ALLOWED; and ``/healthz`` still answers after the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.proxy_routes import proxy_routes
from fak_core.gateway.state import GatewayState
from tests.gateway.support import make_kernel

from .oracle import allowed_kinds, is_json_object_arguments

MAX_BODY = 64 << 10
NATIVE = ["/v1/fak/adjudicate", "/v1/fak/syscall", "/v1/fak/admit", "/v1/fak/trace/reset"]
PROXIES = ["/v1/chat/completions", "/v1/messages"]
ROUTES = [*NATIVE, *PROXIES, "/v1/fak/policy/reload", "/mcp"]
DECIDING = {"/v1/fak/adjudicate", "/v1/fak/syscall"}

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = ["tool", "arguments", "trace_id", "witness", "principal", "read_only", "result"]
TOOLS = st.sampled_from(["echo", "get_user_details", "search_flights", "wire_money", "", " "])


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def nested(depth: int, kind: str) -> bytes:
    if kind == "arguments":
        return b'{"tool":"echo","arguments":{"a":' + b"[" * depth + b"]" * depth + b"}}"
    if kind == "text":  # arguments as JSON text that nests
        inner = "[" * depth + "]" * depth
        return dumps({"tool": "echo", "arguments": '{"a":' + inner + "}"})
    return b'{"a":' * depth + b"1" + b"}" * depth


def sized(size: int) -> bytes:
    head = b'{"tool":"echo","arguments":{"pad":"'
    tail = b'"}}'
    return head + b"x" * max(0, size - len(head) - len(tail)) + tail


bodies = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=200).map(str.encode),
    json_values.map(dumps),
    st.fixed_dictionaries({}, optional={f: json_values for f in FIELDS}).map(dumps),
    st.fixed_dictionaries(
        {"tool": TOOLS}, optional={"arguments": json_values | st.text(max_size=40)}
    ).map(dumps),
    # arguments text of white space and control characters: only JSON's four mean "none"
    st.text(st.characters(categories=["Zs", "Zl", "Zp", "Cc"]), min_size=1, max_size=4).map(
        lambda t: dumps({"tool": "echo", "arguments": t})
    ),
    st.builds(nested, st.integers(1, 1500), st.sampled_from(["arguments", "text", "object"])),
    st.integers(MAX_BODY - 64, MAX_BODY + 64).map(sized),
    st.binary(min_size=1, max_size=20).map(lambda b: b'{"tool":"echo","arguments":"' + b + b'"}'),
    st.sampled_from(
        [
            b'{"tool":"echo","arguments":{"a":100000000000000000000000000000}}',
            b'{"tool":"echo","arguments":"{\\"a\\": NaN}"}',
            b'{"tool":"echo","arguments":"\\ud800"}',
            b'{"tool":"echo","arguments":{"a":1,"a":2}}',
            b'{"tool":"echo","arguments":"{\\"a\\":1,\\"a\\":2}"}',
            b'{"tool":"\\u0000","trace_id":"\\n"}',
            b'{"model":"m","messages":"nope"}',
            b'{"model":"m","max_tokens":-1,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}',
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}',
        ]
    ),
)
content_types = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "text/plain",
        "",
        "application/x-www-form-urlencoded",
    ]
)


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    state = GatewayState(make_kernel(), max_body=MAX_BODY)
    app = create_app(state, extra_routes=proxy_routes(state, None))
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as c:
        yield c


def judge(route: str, body: bytes, status: int, answer: Any) -> None:
    assert status < 500, f"{route} answered {status}: {answer!r}"
    if route == "/mcp":
        return  # the SDK's transport: its own JSON-RPC error shapes, checked for no 5xx only
    if status >= 400:
        assert isinstance(answer, dict) and "error" in answer, answer
        return
    if route in DECIDING and status == 200:
        verdict = answer["verdict"]
        assert isinstance(verdict.get("kind"), str)
        if verdict["kind"] in allowed_kinds():
            sent = json.loads(body)  # a 200 means the body was a JSON object
            assert is_json_object_arguments(sent.get("arguments")), (
                f"{route} allowed arguments that are not a JSON object: {sent.get('arguments')!r}"
            )


def test_hostile_bodies_never_5xx_and_never_allow_malformed(
    client: TestClient, record_property: Callable[[str, object], None]
) -> None:
    ran = 0

    @settings(
        max_examples=max(40, settings.default.max_examples * 5),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(route=st.sampled_from(ROUTES), body=bodies, content_type=content_types)
    def run(route: str, body: bytes, content_type: str) -> None:
        nonlocal ran
        ran += 1
        headers = {"content-type": content_type} if content_type else {}
        if route == "/mcp":
            headers["accept"] = "application/json, text/event-stream"
        r = client.post(route, content=body, headers=headers)
        try:
            answer = r.json()
        except ValueError:
            answer = r.text
        judge(route, body, r.status_code, answer)

    try:
        run()
    finally:
        record_property("fuzz_cases", ran)
    health = client.get("/healthz")
    assert health.status_code == 200 and health.json()["ok"] is True


@pytest.mark.parametrize("route", [*NATIVE, *PROXIES, "/mcp"])
def test_body_over_the_cap_is_413_with_the_limit_on_every_route(
    client: TestClient, route: str
) -> None:
    r = client.post(
        route, content=sized(MAX_BODY + 1), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    doc = r.json()
    message = doc["error"]["message"]
    assert str(MAX_BODY) in message, message
