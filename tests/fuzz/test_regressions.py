"""Bugs the fuzzers found, pinned as plain examples."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.middleware import header_value
from fak_core.gateway.state import GatewayState
from fak_core.jsondepth import MAX_JSON_DEPTH
from tests.gateway.support import make_kernel

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize("trace", ["\U000aab4d", "caf\u00e9 \u2603", "a\nb", "50%", "\U0001f1fa"])
@pytest.mark.parametrize("route", ["/v1/fak/adjudicate", "/v1/fak/syscall", "/v1/fak/admit"])
def test_non_ascii_body_trace_is_echoed_percent_encoded_not_a_500(route: str, trace: str) -> None:
    """A body trace id that is not visible ASCII used to crash the header write (500)."""
    with TestClient(
        create_app(GatewayState(make_kernel()), mcp=False), base_url="http://127.0.0.1"
    ) as client:
        r = client.post(route, json={"tool": "echo", "trace_id": trace})
        assert r.status_code == 200, r.text
        assert r.json()["trace_id"] == trace.strip()
        assert unquote(r.headers["x-trace-id"]) == trace.strip()
        # the same trace is the same session: its taint is readable by its own id
        own = {"X-Fak-Session": r.headers["x-fak-session"]}
        reset = client.post("/v1/fak/trace/reset", json={"trace_id": trace}, headers=own)
        assert reset.status_code == 200, reset.text


def test_header_value_keeps_visible_ascii_and_encodes_the_rest() -> None:
    assert header_value("t-1 ok") == "t-1 ok"
    assert header_value("a%b\u00e9") == "a%25b%C3%A9"
    assert header_value("a\tb") == "a%09b"


def nested_body(field: str, depth: int) -> str:
    nest = "[" * depth + "]" * depth
    return f'{{"tool": "echo", "{field}": {{"a": {nest}}}}}'


@pytest.mark.fak_theorem("D10.3")
@pytest.mark.parametrize("depth", [70, MAX_JSON_DEPTH - 2])
@pytest.mark.parametrize("route", ["/v1/fak/adjudicate", "/v1/fak/syscall"])
def test_deep_arguments_are_a_malformed_deny_not_a_500(route: str, depth: int) -> None:
    """Arguments nested 256..1024 deep parsed, then crashed re-encoding (orjson writes 255);
    now a body the gateway reads holds arguments the kernel can refuse as a value."""
    with TestClient(
        create_app(GatewayState(make_kernel()), mcp=False), base_url="http://127.0.0.1"
    ) as client:
        r = client.post(route, content=nested_body("arguments", depth), headers=JSON)
        assert r.status_code == 200, r.text
        verdict = r.json()["verdict"]
        assert (verdict["kind"], verdict["reason"]) == ("DENY", "MALFORMED")
        assert "deeper than 64 levels" in verdict["detail"]["claim"]


@pytest.mark.parametrize("depth", [100, MAX_JSON_DEPTH - 2])
def test_deep_admitted_result_is_kept_as_text_not_a_500(depth: int) -> None:
    with TestClient(
        create_app(GatewayState(make_kernel()), mcp=False), base_url="http://127.0.0.1"
    ) as client:
        r = client.post("/v1/fak/admit", content=nested_body("result", depth), headers=JSON)
        assert r.status_code == 200, r.text
        assert r.json()["result"]["content"].count("[") == depth


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, 300, 1015, 2000])
def test_bodies_deeper_than_the_gateway_reads_are_a_clear_400(depth: int) -> None:
    with TestClient(
        create_app(GatewayState(make_kernel()), mcp=False), base_url="http://127.0.0.1"
    ) as client:
        for route, field in (("/v1/fak/admit", "result"), ("/v1/fak/adjudicate", "arguments")):
            r = client.post(route, content=nested_body(field, depth), headers=JSON)
            assert r.status_code == 400, r.text
            message = r.json()["error"]["message"]
            assert f"nests deeper than {MAX_JSON_DEPTH} levels" in message


@pytest.mark.parametrize("raw", ["%1C", "%1F", "%C2%85"])
def test_a_path_trace_the_schema_counts_as_text_is_not_called_missing(raw: str) -> None:
    """``GET /v1/fak/trace/%1C`` answered 400 "missing trace id": the route stripped with
    ``str.strip()``, which also takes \\x1c-\\x1f and \\x85, while the OpenAPI ``pattern: \\S``
    (ECMA-262) counts them as text. The route now strips what the schema calls blank."""
    with TestClient(
        create_app(GatewayState(make_kernel()), mcp=False), base_url="http://127.0.0.1"
    ) as client:
        trace = unquote(raw)
        first = client.post("/v1/fak/adjudicate", json={"tool": "echo", "trace_id": trace})
        assert first.status_code == 200, first.text
        own = {"X-Fak-Session": first.headers["x-fak-session"]}
        r = client.get(f"/v1/fak/trace/{raw}", headers=own)
        assert r.status_code == 200, r.text
        assert r.json()["trace_id"] == trace
        stranger = client.get(f"/v1/fak/trace/{raw}")
        assert stranger.status_code == 403, stranger.text


@pytest.mark.fak_theorem("A7.4")
@pytest.mark.parametrize("text", ["\x1c", "\u2028", "\x85", "\u3000", " \x0b "])
def test_non_json_white_space_arguments_are_malformed_not_empty(text: str) -> None:
    """The wire took any str.isspace() text as ``{}``: a call with arguments that are not
    JSON was ALLOWED. Only JSON white space (space, tab, CR, LF) means no arguments."""
    with TestClient(
        create_app(GatewayState(make_kernel()), mcp=False), base_url="http://127.0.0.1"
    ) as client:
        r = client.post("/v1/fak/adjudicate", json={"tool": "echo", "arguments": text})
        verdict = r.json()["verdict"]
        assert (verdict["kind"], verdict["reason"]) == ("DENY", "MALFORMED")
        ok = client.post("/v1/fak/adjudicate", json={"tool": "echo", "arguments": " \t\r\n"})
        assert ok.json()["verdict"]["kind"] == "ALLOW"


def test_hypothesis_prints_falsifying_examples_after_schemathesis_is_imported() -> None:
    """schemathesis blanks Hypothesis' example printer process-wide when it first builds a
    strategy; the fuzz conftest restores it, so a later failing property still says which
    input failed."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from schemathesis.generation.hypothesis import setup

    from .conftest import restore_hypothesis_printer

    setup()  # what generating the first schemathesis case does (once per process)
    restore_hypothesis_printer()

    @settings(max_examples=50, database=None, derandomize=True)
    @given(st.integers(0, 20))
    def fails_at_ten(x: int) -> None:
        assert x < 10

    with pytest.raises(AssertionError) as info:
        fails_at_ten()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "x=10" in notes, notes
