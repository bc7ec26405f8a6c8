"""The wire seam at its edges: blank argument text, the deadline's record, refused bodies.

D10.1: arguments sent as JSON text that is only JSON white space reach the kernel as the
empty object (what an absent ``arguments`` is), on HTTP and MCP alike, while any other text,
white space the JSON grammar does not allow included, reaches it verbatim for rung 0 to
judge; a decision that misses the deadline is counted and, with a decision journal, is the
row on record. D10.3: a body that is not a JSON object, or one with a field of the wrong
JSON type, is a 400 whose envelope is exactly ``{"error": {message, type, code, param}}``
and whose message names the JSON type it got. The expectations are written here from the
theorems and the JSON grammar (RFC 8259 white space is space, tab, LF and CR), never
through the gateway's helpers; the kernel's record of the calls it decided is read through
a subscriber, the journal through its own reader.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from fak_core import Kernel, Verdict, parse_policy
from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from fak_core.journal import Journal, read_rows
from fak_core.view import CallView
from tests.gateway.test_parity_property import harness

#: Argument texts of JSON white space only (RFC 8259: space, tab, LF, CR): the empty object.
BLANK_TEXTS = ["", " ", "\t", "\n", "\r", " \t\r\n ", "\n\n\n"]
#: Text that is blank to ``str.strip`` but not to JSON: passed on for rung 0 to refuse.
NOT_JSON_SPACE = ["\x1c", "\u2028", "\xa0", "\x0b", "\x0c", " \x1f "]


@pytest.mark.fak_theorem("D10.1")
def test_blank_argument_text_is_the_empty_object_and_other_text_is_verbatim() -> None:
    with harness() as h:
        for i, text in enumerate(BLANK_TEXTS + NOT_JSON_SPACE):
            want_args = "{}" if text in BLANK_TEXTS else text
            for side in ("http", "mcp"):
                trace = f"blank-{i}-{side}"
                body = {"tool": "echo", "arguments": text, "trace_id": trace}
                if side == "http":
                    r = h.http.post("/v1/fak/adjudicate", json=body)
                    assert r.status_code == 200, r.text
                    got = r.json()["verdict"]
                else:
                    got = h.mcp_adjudicate(body)["verdict"]
                seen = h.seen.pop(trace, [])
                assert [c.args for c in seen] == [want_args], (side, repr(text))
                if text in BLANK_TEXTS:
                    assert got == {"kind": "ALLOW", "by": "floor"}, (side, repr(text))
                else:
                    assert (got["kind"], got["reason"], got["by"]) == (
                        "DENY",
                        "MALFORMED",
                        "preflight",
                    ), (side, repr(text))


@pytest.mark.fak_theorem("D10.1")
def test_a_late_decision_is_counted_and_is_the_decision_on_record(tmp_path: Path) -> None:
    release = threading.Event()
    kernel = Kernel(parse_policy({"version": "fak-policy/v1", "allow": ["slow"]}))

    def waits(view: CallView) -> Verdict:
        release.wait(3.0)
        return Verdict.allow("waits")

    kernel.add_adjudicator(waits, 50, tools=["slow"])
    db = tmp_path / "j.db"
    journal = Journal(db)
    journal.attach(kernel)
    state = GatewayState(kernel, decide_timeout=0.2, journal=journal)
    args = '{"x": 1}'
    try:
        with TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1") as client:
            counts = []
            for n, route in enumerate(("/v1/fak/adjudicate", "/v1/fak/syscall")):
                trace = f"late-{n}"
                body = {"tool": "slow", "arguments": args, "trace_id": trace}
                r = client.post(route, json=body)
                assert r.status_code == 200, r.text
                assert r.json()["verdict"]["by"] == "gateway"
                rows = [row for row in read_rows(db) if row["trace"] == trace]
                late = [row for row in rows if row["by"] == "gateway"]
                assert len(late) == 1, rows
                assert {k: late[0][k] for k in ("event", "tool", "verdict", "reason")} == {
                    "event": "decide",
                    "tool": "slow",
                    "verdict": "DENY",
                    "reason": "DEFAULT_DENY",
                }
                digest = "sha256:" + hashlib.sha256(args.encode()).hexdigest()
                assert late[0]["args_digest"] == digest
                counts.append(client.get("/healthz").json()["limits"]["decide_timeouts"])
            assert counts == [1, 2]
    finally:
        release.set()
        state.close()
        kernel.close()


#: A body that is not a JSON object, and the JSON type the refusal must name.
NOT_OBJECTS: list[tuple[str, str]] = [
    ("null", "null"),
    ("true", "boolean"),
    ("false", "boolean"),
    ("0", "number"),
    ("-1.5e3", "number"),
    ('"tool"', "string"),
    ("[]", "array"),
    ('[{"tool": "echo"}]', "array"),
]
#: A field of the wrong JSON type: (field, value, the type the refusal names).
MISTYPED: list[tuple[str, Any, str]] = [
    ("principal", {"a": 1}, "object"),
    ("witness", [], "array"),
    ("trace_id", 12, "number"),
    ("tool", 0.5, "number"),
    ("tool", False, "boolean"),
    ("read_only", "yes", "string"),
    ("read_only", {}, "object"),
]


def _envelope(r: Any) -> dict[str, Any]:
    assert r.status_code == 400, r.text
    doc = r.json()
    assert set(doc) == {"error"}, doc
    err = doc["error"]
    assert set(err) == {"message", "type", "code", "param"}, err
    assert err["type"] == "invalid_request_error" and err["code"] is None, err
    return dict(err)


@pytest.mark.fak_theorem("D10.3")
def test_a_body_the_gateway_cannot_read_is_a_400_naming_its_json_type() -> None:
    kernel = Kernel(parse_policy({"version": "fak-policy/v1", "allow": ["echo"]}))
    state = GatewayState(kernel)
    try:
        with TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1") as client:
            for route in ("/v1/fak/adjudicate", "/v1/fak/syscall", "/v1/fak/admit"):
                for raw, json_type in NOT_OBJECTS:
                    err = _envelope(
                        client.post(
                            route, content=raw, headers={"content-type": "application/json"}
                        )
                    )
                    assert f"not a JSON {json_type};" in err["message"], (route, raw, err)
                    assert err["param"] is None
                for field, value, json_type in MISTYPED:
                    body: dict[str, Any] = {"tool": "echo", "arguments": {}, field: value}
                    err = _envelope(
                        client.post(
                            route,
                            content=json.dumps(body).encode(),
                            headers={"content-type": "application/json"},
                        )
                    )
                    assert err["message"].endswith(f"not a JSON {json_type}"), (route, err)
                    assert field in err["message"]
            assert kernel.counters.decisions == 0
    finally:
        state.close()
        kernel.close()
