"""Hypothesis-generated hostile frames against one real ``fak mcp`` stdio subprocess.

Each example writes one raw frame, then a ``ping``; everything the server writes before the
ping's answer is its answer to the frame. The expected answer is derived from the frame's
kind by the JSON-RPC 2.0 and MCP rules, not from the server's code: -32700 for text that is
not JSON (invalid UTF-8 included), -32600 for JSON that is not a request, -32601 for an
unknown method, -32602 for wrong parameters, a tool result with ``isError`` for a tool body
the gateway cannot turn into a call, and a verdict for a well-formed call, which is never
ALLOW unless its arguments are a JSON object. The server must answer every ping.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.mcp_stdio import Stdio
from tests.gateway.support import POLICY_DOC

from .oracle import allowed_kinds, is_json_object_arguments

PARSE, INVALID_REQUEST, NO_METHOD, INVALID_PARAMS = -32700, -32600, -32601, -32602


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stdio]:
    policy = Path(tmp_path_factory.mktemp("mcp")) / "policy.json"
    policy.write_text(json.dumps(POLICY_DOC), encoding="utf-8")
    srv = Stdio(policy)
    try:
        srv.handshake("fuzz")
        yield srv
    finally:
        assert srv.close() == 0


# ------------------------------------------------------------------------------ frames
@dataclass(frozen=True)
class Frame:
    """A raw frame and what it must earn: an error code (with the id it must echo), a tool
    error, or a verdict."""

    raw: bytes
    expect: str  # "error", "tool_error", "verdict"
    code: int = 0
    id: Any = None
    arguments: Any = field(default=None, compare=False)


request_ids = st.integers(1, 999_999) | st.text(min_size=1, max_size=8)
json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
not_objects = json_scalars | st.lists(json_values, max_size=3)


def is_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True


def request(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        doc["params"] = params
    return doc


def call(rid: Any, name: str, arguments: Any) -> dict[str, Any]:
    return request(rid, "tools/call", {"name": name, "arguments": arguments})


def enc(doc: Any) -> bytes:
    return json.dumps(doc).encode()


parse_errors = st.one_of(
    # one frame is one line: no newline inside
    st.text(st.characters(codec="utf-8", exclude_characters="\n"), min_size=1, max_size=60)
    .map(str.encode)
    .filter(lambda b: b.strip() and not is_json(b)),
    # invalid UTF-8 inside an otherwise fine request
    st.binary(min_size=1, max_size=6)
    .filter(lambda b: b"\n" not in b and not _utf8(b))
    .map(lambda b: b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b + b'"}}'),
).map(lambda raw: Frame(raw, "error", PARSE, None))
# valid JSON nested past the gateway's one depth limit (orjson's own 1024 included) is a
# request this server will not read: -32600, never a parse error and never dropped
too_deep = st.integers(129, 1500).map(
    lambda d: Frame(b"[" * d + b"]" * d, "error", INVALID_REQUEST, None)
)


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


not_requests = not_objects.filter(lambda v: not isinstance(v, str) or v != "").map(
    lambda v: Frame(enc(v), "error", INVALID_REQUEST, None)
)
bad_versions = st.builds(
    lambda rid, v: Frame(
        enc({**request(rid, "ping"), "jsonrpc": v}), "error", INVALID_REQUEST, rid
    ),
    request_ids,
    json_values.filter(lambda v: v != "2.0"),
)
no_version = request_ids.map(
    lambda rid: Frame(enc({"id": rid, "method": "ping"}), "error", INVALID_REQUEST, rid)
)
unknown_methods = st.builds(
    lambda rid, m: Frame(enc(request(rid, m)), "error", NO_METHOD, rid),
    request_ids,
    st.text(min_size=1, max_size=12).map(lambda t: "fuzz/" + t)
    | st.sampled_from(["tools/delete", "resources/frobnicate", "pong"]),
)
bad_params = st.builds(
    lambda rid, params: Frame(
        enc(request(rid, "tools/call", params)), "error", INVALID_PARAMS, rid
    ),
    request_ids,
    st.one_of(
        st.fixed_dictionaries({"name": json_values.filter(lambda v: not isinstance(v, str))}),
        st.fixed_dictionaries(
            {},
            optional={"arguments": st.dictionaries(st.text(max_size=4), json_values, max_size=2)},
        ),
        st.builds(
            lambda a: {"name": "fak_adjudicate", "arguments": a},
            not_objects.filter(lambda v: v is not None),
        ),
        st.text(max_size=8).filter(lambda n: not n.startswith("fak_")).map(lambda n: {"name": n}),
    ),
)
FIELD_TYPES = {"trace_id": str, "witness": str, "principal": str, "read_only": bool}
tool_errors = st.builds(
    lambda rid, name, body: Frame(enc(call(rid, name, body)), "tool_error", 0, rid),
    request_ids,
    st.sampled_from(["fak_adjudicate", "fak_syscall", "fak_admit"]),
    st.one_of(
        st.just({"tool": "  "}),
        st.builds(
            lambda key, value: {"tool": "echo", key: value},
            st.sampled_from(sorted(FIELD_TYPES)),
            json_values.filter(lambda v: v is not None),
        ).filter(lambda d: not any(isinstance(d.get(k), t) for k, t in FIELD_TYPES.items())),
    ),
)
ARG_TEXT = st.text(max_size=30) | st.sampled_from(
    ['{"a": NaN}', '{"a":1,"a":2}', "\x1c", "[]", "{}"]
)
verdicts = st.builds(
    lambda rid, name, tool, args: Frame(
        enc(call(rid, name, {"tool": tool, "arguments": args})), "verdict", 0, rid, args
    ),
    request_ids,
    st.sampled_from(["fak_adjudicate", "fak_syscall"]),
    st.sampled_from(["echo", "get_user_details", "search_flights", "shell_rm_rf", "nope"]),
    st.none() | json_values.filter(lambda v: isinstance(v, dict)) | ARG_TEXT,
)
deep = st.builds(
    lambda rid, depth: Frame(
        b'{"jsonrpc":"2.0","id":'
        + enc(rid)
        + b',"method":"tools/call","params":{"name":"fak_adjudicate","arguments":'
        + b'{"tool":"echo","arguments":{"a":'
        + b"[" * depth
        + b"]" * depth
        + b"}}}}",
        "deep",
        0,
        rid,
    ),
    request_ids,
    st.integers(64, 1000),  # with the object around them: 65 levels and more
)


def _nest(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


frames = st.one_of(
    parse_errors,
    too_deep,
    not_requests,
    bad_versions,
    no_version,
    unknown_methods,
    bad_params,
    tool_errors,
    verdicts,
    deep,
)


def judge(frame: Frame, answers: list[dict[str, Any]]) -> None:
    assert len(answers) == 1, f"expected one answer to {frame.raw[:200]!r}, got {answers}"
    msg = answers[0]
    assert msg.get("jsonrpc") == "2.0"
    if frame.expect == "error":
        assert "error" in msg, msg
        assert (msg["id"], msg["error"]["code"]) == (frame.id, frame.code), (frame.raw[:200], msg)
        assert msg["error"]["message"]
        return
    assert msg["id"] == frame.id, msg
    if frame.expect == "deep":  # a verdict if the transport reads it, else a JSON-RPC error
        if "error" in msg:
            assert msg["error"]["code"] in (PARSE, INVALID_REQUEST, INVALID_PARAMS), msg
        else:
            verdict = msg["result"]["structuredContent"]["verdict"]
            assert (verdict["kind"], verdict["reason"]) == ("DENY", "MALFORMED"), verdict
        return
    result = msg["result"]
    if frame.expect == "tool_error":
        assert result["isError"] is True, result
        assert result["content"][0]["text"], result
        return
    assert result["isError"] is False, result
    verdict = result["structuredContent"]["verdict"]
    if verdict["kind"] in allowed_kinds():
        assert is_json_object_arguments(frame.arguments), (
            f"MCP allowed arguments that are not a JSON object: {frame.arguments!r}"
        )


def test_hostile_frames_get_the_right_answer_and_the_server_keeps_serving(
    server: Stdio, record_property: Callable[[str, object], None]
) -> None:
    ran = 0

    @settings(
        max_examples=max(40, settings.default.max_examples * 3),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(frame=frames)
    def run(frame: Frame) -> None:
        nonlocal ran
        ran += 1
        judge(frame, server.exchange(frame.raw, frame.id))

    try:
        run()
    finally:
        record_property("fuzz_cases", ran)


def test_frame_over_the_size_limit_is_refused_and_serving_continues(server: Stdio) -> None:
    from fak_core.gateway.mcp_server import MAX_FRAME

    big = enc(call(77, "fak_adjudicate", {"tool": "echo", "arguments": {"p": "x" * MAX_FRAME}}))
    answers = server.exchange(big)  # not parsed, so answered with id null
    assert len(answers) == 1
    assert answers[0]["error"]["code"] == INVALID_REQUEST
    assert f"maximum size of {MAX_FRAME} bytes" in answers[0]["error"]["message"]


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"a": _nest(70)}, "deeper than 64 levels"),
        ('{"a": "' + "x" * (1 << 20) + '"}', "over the 1048576-byte limit"),
    ],
    ids=["depth", "size"],
)
def test_argument_limits_are_clear_denies_over_mcp(
    server: Stdio, arguments: Any, needle: str
) -> None:
    answers = server.exchange(
        enc(call(78, "fak_adjudicate", {"tool": "echo", "arguments": arguments})), 78
    )
    verdict = answers[0]["result"]["structuredContent"]["verdict"]
    assert verdict["kind"] == "DENY" and verdict["reason"] in ("MALFORMED", "OVERSIZE")
    assert needle in verdict["detail"]["claim"]


def test_frame_nested_past_the_sdk_reader_is_answered_not_dropped(server: Stdio) -> None:
    """The SDK's JSON reader stops at about 200 levels (orjson at 1024) and dropped such a
    frame without an answer, so the client waited forever; now it is a -32600 with its id."""
    depth = 300
    frame = (
        b'{"jsonrpc":"2.0","id":79,"method":"tools/call","params":{"name":"fak_adjudicate",'
        b'"arguments":{"tool":"echo","arguments":{"a":' + b"[" * depth + b"]" * depth + b"}}}}"
    )
    answers = server.exchange(frame, 79)
    assert len(answers) == 1
    assert (answers[0]["id"], answers[0]["error"]["code"]) == (79, INVALID_REQUEST)
    assert "nests deeper than 128 levels" in answers[0]["error"]["message"]
