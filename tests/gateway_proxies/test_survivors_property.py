"""Property: the survivors are exactly the ALLOW and TRANSFORM calls, in order.

Hypothesis generates mixes of proposed calls whose verdict is known from how they were
built (allowed, denied, repaired, witness-gated, quarantined, unknown, malformed
arguments, a blank tool name, a TRANSFORM whose repaired arguments are not a JSON object)
and a per-turn limit (``GatewayState.max_tool_calls``) that may cut the mix short. Gateway
and upstream both run in process (``httpx.ASGITransport``) for speed; both wires,
buffered and streaming. Besides what the client receives, the gateway's record of every
proposal is checked against the category: its tool, whether it was admitted, the
verdict's kind and reason, and for a call past the limit the claim naming its position.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fak_core import Policy, Verdict

from .inprocess import fresh_trace, in_process_gateway
from .kernels import ALLOWED
from .scripted_upstream import Script
from .test_malformed_upstream import check_anthropic_grammar, check_openai_grammar

_UPSTREAM, _STATE, _APP = in_process_gateway()
# Two tools whose TRANSFORM repairs to something that is not a JSON object.
_STATE.kernel.set_policy(
    Policy(
        allow=(*ALLOWED, "repair_to_array", "repair_to_text"),
        deny={"deny_thing": "POLICY_BLOCK"},
        redact_fields=("password",),
    )
)
_STATE.kernel.add_adjudicator(
    lambda view: Verdict.transform("[1, 2]", "test-repair"), 50, tools=["repair_to_array"]
)
_STATE.kernel.add_adjudicator(
    lambda view: Verdict.transform("{not json", "test-repair"), 50, tools=["repair_to_text"]
)

words = st.text("abcdefgh", min_size=1, max_size=6)
plain_args = st.dictionaries(
    words.filter(lambda w: w != "password"), st.integers(0, 99) | words, max_size=3
)

# (category, name, arguments); the expected outcome follows from the category alone.
CALLS = st.one_of(
    st.tuples(
        st.just("allow"), st.sampled_from(["send_email", "fetch_url", "get_user"]), plain_args
    ),
    st.tuples(
        st.just("transform"), st.just("get_user"), plain_args.map(lambda a: {**a, "password": "pw"})
    ),
    st.tuples(st.just("deny"), st.just("deny_thing"), plain_args),
    st.tuples(st.just("deny"), st.sampled_from(["frobnicate", "rm_all"]), plain_args),
    st.tuples(st.just("witness"), st.just("wire_money"), plain_args),
    st.tuples(st.just("quarantine"), st.just("hold_thing"), plain_args),
    st.tuples(
        st.just("malformed"),
        st.just("send_email"),
        st.sampled_from(["{bad", "[1,2]", '"str"', '{"a":']),
    ),
    st.tuples(st.just("blank"), st.sampled_from(["", " ", "\t"]), plain_args),
    st.tuples(
        st.just("bad_repair"), st.sampled_from(["repair_to_array", "repair_to_text"]), plain_args
    ),
)

#: category -> (kind, reason, by) of the gateway's record (None: any ``by``)
RECORD: dict[str, tuple[str, str | None, str | None]] = {
    "allow": ("ALLOW", None, None),
    "transform": ("TRANSFORM", None, None),
    "witness": ("REQUIRE_WITNESS", "UNWITNESSED", None),
    "quarantine": ("QUARANTINE", "TRUST_VIOLATION", None),
    "malformed": ("DENY", "MALFORMED", "preflight"),
    "blank": ("DENY", "MALFORMED", "gateway"),
    "bad_repair": ("DENY", "MALFORMED", "gateway"),
}
DENIED = {"deny_thing": "POLICY_BLOCK", "frobnicate": "DEFAULT_DENY", "rm_all": "DEFAULT_DENY"}


def expected(mix: list[tuple[str, str, Any]], limit: int = 99) -> list[tuple[str, str, Any]]:
    out = []
    for i, (cat, name, args) in enumerate(mix[:limit]):
        if cat == "allow":
            out.append((f"{i}", name, args))
        elif cat == "transform":
            out.append((f"{i}", name, {k: v for k, v in args.items() if k != "password"}))
    return out


async def _turn(wire: str, stream: bool) -> tuple[int, str]:
    doc: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "go"}],
        "stream": stream,
    }
    path = "/v1/chat/completions" if wire == "openai" else "/v1/messages"
    if wire == "anthropic":
        doc["max_tokens"] = 8
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=_APP), base_url="http://gw"
    ) as c:
        r = await c.post(path, json=doc, headers={"x-trace-id": fresh_trace("prop")})
        return r.status_code, r.text


def survivors(wire: str, stream: bool, text: str) -> list[tuple[str, str, Any]]:
    if not stream:
        doc = json.loads(text)
        if wire == "openai":
            calls = doc["choices"][0]["message"].get("tool_calls") or []
            return [
                (
                    c["id"].split("_")[-1],
                    c["function"]["name"],
                    json.loads(c["function"]["arguments"]),
                )
                for c in calls
            ]
        return [
            (b["id"].split("_")[-1], b["name"], b["input"])
            for b in doc["content"]
            if b["type"] == "tool_use"
        ]
    events = [json.loads(ln[6:]) for ln in text.splitlines() if ln.startswith("data: {")]
    if wire == "openai":
        acc: dict[int, list[str]] = {}
        for e in events:
            for ch in e["choices"]:
                for tc in ch["delta"].get("tool_calls") or []:
                    acc.setdefault(tc["index"], ["", "", ""])
                    acc[tc["index"]][0] += tc.get("id") or ""
                    acc[tc["index"]][1] += tc["function"].get("name") or ""
                    acc[tc["index"]][2] += tc["function"].get("arguments") or ""
        assert sorted(acc) == list(range(len(acc)))  # survivors are re-indexed 0..k-1
        return [(v[0].split("_")[-1], v[1], json.loads(v[2])) for _, v in sorted(acc.items())]
    blocks: dict[int, list[Any]] = {}
    for e in events:
        if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use":
            blocks[e["index"]] = [
                e["content_block"]["id"].split("_")[-1],
                e["content_block"]["name"],
                "",
            ]
        elif e["type"] == "content_block_delta" and e["index"] in blocks:
            blocks[e["index"]][2] += e["delta"]["partial_json"]
    return [(b[0], b[1], json.loads(b[2])) for _, b in sorted(blocks.items())]


def check_records(mix: list[tuple[str, str, Any]], limit: int, records: list[Any]) -> None:
    """The gateway's record of each proposal, in order, against its category alone."""
    assert [r["tool"] for r in records] == [name for _, name, _ in mix]
    for i, ((cat, name, _), rec) in enumerate(zip(mix, records, strict=True)):
        verdict = rec["verdict"]
        if i >= limit:
            assert (verdict["kind"], verdict["reason"], verdict["by"]) == (
                "DENY",
                "OVERSIZE",
                "gateway",
            )
            claim = verdict["detail"]["claim"]
            assert f"proposes {len(mix)} tool calls" in claim, claim
            assert f"call {i + 1} was not adjudicated" in claim, claim
            assert rec["admitted"] is False
            continue
        kind, reason, by = RECORD.get(cat) or ("DENY", DENIED[name], None)
        assert (verdict["kind"], verdict.get("reason")) == (kind, reason), (cat, verdict)
        if by is not None:
            assert verdict["by"] == by, (cat, verdict)
        if cat == "blank":
            assert verdict["detail"]["claim"].startswith("missing tool name"), verdict
        if cat == "bad_repair":
            assert verdict["detail"]["claim"] == "TRANSFORM carried no repaired JSON object"
        assert rec["admitted"] is (cat in ("allow", "transform")), (cat, rec)


def _records(stream: bool, text: str) -> list[Any]:
    if not stream:
        return list(json.loads(text)["fak"]["adjudications"])
    for line in text.splitlines():
        if line.startswith("data: {") and '"fak"' in line:
            event = json.loads(line[6:])
            if "fak" in event:
                return list(event["fak"]["adjudications"])
    raise AssertionError("the stream carried no fak record")


def text_and_stop(wire: str, stream: bool, text: str) -> tuple[list[str], str | None]:
    """The text the client received (per text block; one string on OpenAI) and how the
    turn ended (``finish_reason`` / ``stop_reason``)."""
    if not stream:
        doc = json.loads(text)
        if wire == "openai":
            choice = doc["choices"][0]
            return [choice["message"].get("content") or ""], choice["finish_reason"]
        return [b["text"] for b in doc["content"] if b["type"] == "text"], doc["stop_reason"]
    events = [json.loads(ln[6:]) for ln in text.splitlines() if ln.startswith("data: {")]
    if wire == "openai":
        parts, finish = [], None
        for e in events:
            for ch in e["choices"]:
                parts.append(ch["delta"].get("content") or "")
                finish = ch.get("finish_reason") or finish
        return ["".join(parts)], finish
    texts: dict[int, str] = {}
    stop = None
    for e in events:
        if e["type"] == "content_block_start" and e["content_block"]["type"] == "text":
            texts[e["index"]] = e["content_block"]["text"]
        elif e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta":
            texts[e["index"]] += e["delta"]["text"]
        elif e["type"] == "message_delta":
            stop = e["delta"].get("stop_reason")
    return [t for _, t in sorted(texts.items())], stop


def summary_of(records: list[Any]) -> str:
    """The refusal note, written from the record: each refused call's name, kind, reason
    and disposition, in order."""
    items = []
    for r in records:
        if r["admitted"]:
            continue
        v = r["verdict"]
        parts = [p for p in (v.get("reason"), v.get("disposition")) if p]
        why = f" ({'/'.join(parts)})" if parts else ""
        items.append(f"{r['tool'] or '<unnamed>'}: {v['kind']}{why}")
    return "All proposed tool calls were refused by the fak kernel: " + "; ".join(items)


def check_mix(mix: list[tuple[str, str, Any]], wire: str, stream: bool, limit: int) -> None:
    # the upstream also forges a fak record everywhere it can: only the gateway's counts
    forge = ("top", "choice", "message", "delta", "call", "block")
    _UPSTREAM.reset(Script(text="t", calls=[(name, args) for _, name, args in mix], forge=forge))
    _STATE.max_tool_calls = limit
    try:
        status, text = asyncio.run(_turn(wire, stream))
    finally:
        _STATE.max_tool_calls = 99
    assert status == 200, text
    assert "forged-by-upstream" not in text
    assert survivors(wire, stream, text) == expected(mix, limit)
    records = _records(stream, text)
    check_records(mix, limit, records)
    # the text is relayed; the refusal note follows it exactly when something was
    # proposed and nothing survived, and the turn ends as what the client received says
    kept, all_refused = bool(expected(mix, limit)), bool(mix) and not expected(mix, limit)
    texts, stop = text_and_stop(wire, stream, text)
    note = summary_of(records)
    if wire == "openai":
        assert texts == ([f"t\n\n{note}"] if all_refused else ["t"]), texts
        assert stop == ("tool_calls" if kept else "stop")
        if stream:
            check_openai_grammar(text, [name for _, name, _ in expected(mix, limit)])
    else:
        assert texts == (["t", note] if all_refused else ["t"]), texts
        assert stop == ("tool_use" if kept else "end_turn")
        if stream:  # the scripted upstream sends one ping
            check_anthropic_grammar(text, 1, kept)


@pytest.mark.fak_theorem("D10.2", "D10.5")
def test_survivors_are_exactly_allow_and_transform_in_order() -> None:
    # The settings are built when the test runs, not at import, so they inherit the
    # profile active then (in proof mode a mutant re-run's profile skips shrinking).
    prop = given(
        mix=st.lists(CALLS, max_size=6),
        wire=st.sampled_from(["openai", "anthropic"]),
        stream=st.booleans(),
        limit=st.sampled_from([1, 2, 3, 5, 99]),
    )(check_mix)
    # every category, and a limit that cuts a mix short, whatever the budget
    every = [
        ("allow", "send_email", {"a": 1}),
        ("blank", "", {}),
        ("bad_repair", "repair_to_text", {}),
        ("transform", "get_user", {"password": "pw"}),
        ("bad_repair", "repair_to_array", {}),
        ("malformed", "send_email", "{bad"),
    ]
    prop = example(mix=every, wire="openai", stream=False, limit=99)(prop)
    prop = example(mix=every, wire="anthropic", stream=True, limit=4)(prop)
    prop = example(mix=every, wire="openai", stream=True, limit=2)(prop)
    active = settings.default
    at_most = min(25, active.max_examples) if active is not None else 25
    settings(max_examples=at_most, deadline=None, suppress_health_check=[HealthCheck.too_slow])(
        prop
    )()
