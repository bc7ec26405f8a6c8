"""Per-turn limits on the proxies, both wires, streamed and not, through the official SDKs.

- ``max_tool_calls``: the first N proposed calls are adjudicated, every call past N is
  dropped undecided with DENY/OVERSIZE and a claim naming the limit.
- a hanging adjudicator: the call is dropped with DENY/DEFAULT_DENY ("adjudication timed
  out") within the decision deadline, and the gateway keeps serving.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from fak_core import Verdict
from fak_core.view import CallView

from .clients import anthropic_client, openai_client
from .conftest import Gateway
from .kernels import make_state
from .scripted_upstream import Script, ScriptedUpstream

LIMIT = 3


def openai_turn(gw: Gateway, stream: bool) -> tuple[list[str], list[dict[str, Any]]]:
    """(names of the tool calls the client received, the fak adjudications)."""
    client = openai_client(gw.url)
    ask: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "go"}]}
    if not stream:
        resp = client.chat.completions.create(**ask)
        calls = resp.choices[0].message.tool_calls or []
        return [c.function.name for c in calls], (resp.model_extra or {})["fak"]["adjudications"]
    names: dict[int, str] = {}
    fak: dict[str, Any] = {}
    for chunk in client.chat.completions.create(**ask, stream=True):
        fak = (chunk.model_extra or {}).get("fak", fak)
        for c in chunk.choices:
            for tc in c.delta.tool_calls or []:
                names[tc.index] = names.get(tc.index, "") + (tc.function.name or "")
    return [names[i] for i in sorted(names)], fak["adjudications"]


def anthropic_turn(gw: Gateway, stream: bool) -> tuple[list[str], list[dict[str, Any]]]:
    client = anthropic_client(gw.url)
    ask: dict[str, Any] = {
        "model": "m",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "go"}],
    }
    if not stream:
        msg = client.messages.create(**ask)
        names = [b.name for b in msg.content if b.type == "tool_use"]
        return names, (msg.model_extra or {})["fak"]["adjudications"]
    names = []
    fak: dict[str, Any] = {}
    with client.messages.stream(**ask) as events:
        for event in events:
            if event.type == "content_block_start" and event.content_block.type == "tool_use":
                names.append(event.content_block.name)
            extra = getattr(event, "model_extra", None) or {}
            fak = extra.get("fak", fak)
            if event.type == "message_delta":
                fak = (event.model_extra or {}).get("fak", fak) or fak
        final = events.get_final_message()
    fak = fak or (final.model_extra or {}).get("fak", {})
    return names, fak["adjudications"]


TURNS = {"openai": openai_turn, "anthropic": anthropic_turn}
CASES = [(wire, stream) for wire in TURNS for stream in (False, True)]


@pytest.mark.parametrize(("wire", "stream"), CASES)
def test_calls_past_the_turn_limit_are_dropped_with_oversize(
    make_gateway: Any, upstream: ScriptedUpstream, wire: str, stream: bool
) -> None:
    state = make_state()
    state.max_tool_calls = LIMIT
    gw = make_gateway(state=state)
    proposed = [("send_email", {"to": "ops", "body": str(i)}) for i in range(5)]
    proposed[1] = ("deny_thing", {})
    upstream.reset(Script(calls=proposed))
    decisions = state.kernel.counters.decisions
    names, adjudications = TURNS[wire](gw, stream)
    assert names == ["send_email", "send_email"]  # calls 1 and 3; 2 is denied by policy
    kinds = [
        (a["admitted"], a["verdict"]["kind"], a["verdict"].get("reason")) for a in adjudications
    ]
    assert kinds == [
        (True, "ALLOW", None),
        (False, "DENY", "POLICY_BLOCK"),
        (True, "ALLOW", None),
        (False, "DENY", "OVERSIZE"),
        (False, "DENY", "OVERSIZE"),
    ]
    for position, a in ((4, adjudications[3]), (5, adjudications[4])):
        assert a["verdict"]["by"] == "gateway"
        assert a["verdict"]["detail"]["claim"] == (
            f"the turn proposes 5 tool calls, over the gateway's limit of {LIMIT} per turn; "
            f"call {position} was not adjudicated: ask the model for at most {LIMIT}"
        )
    # the calls past the limit never reached the kernel
    assert state.kernel.counters.decisions - decisions == LIMIT


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.mark.parametrize(("wire", "stream"), CASES)
def test_hanging_adjudicator_drops_the_call_and_serving_continues(
    make_gateway: Any, upstream: ScriptedUpstream, release: threading.Event, wire: str, stream: bool
) -> None:
    state = make_state()
    state.decide_timeout = 0.2

    def hang(view: CallView) -> Verdict:
        release.wait()
        return Verdict.allow("late")

    state.kernel.add_adjudicator(hang, 60, tools=["fetch_url"])
    gw = make_gateway(state=state)
    upstream.reset(Script(calls=[("fetch_url", {"url": "x"}), ("send_email", {"to": "ops"})]))
    names, adjudications = TURNS[wire](gw, stream)
    assert names == ["send_email"]
    late = adjudications[0]["verdict"]
    assert (late["kind"], late["reason"], late["by"]) == ("DENY", "DEFAULT_DENY", "gateway")
    assert late["detail"]["claim"] == "adjudication timed out after 0.2s"
    assert state.decide_timeouts == 1
    # the next turn is served normally
    upstream.reset(Script(calls=[("send_email", {"to": "ops"})]))
    assert TURNS[wire](gw, stream)[0] == ["send_email"]
    release.set()
    state.close()


@pytest.mark.parametrize(("wire", "stream"), CASES)
def test_argument_size_and_depth_limits_drop_the_call_with_a_clear_claim(
    gateway: Gateway, upstream: ScriptedUpstream, wire: str, stream: bool
) -> None:
    deep: Any = {}
    for _ in range(70):
        deep = {"d": deep}
    upstream.reset(
        Script(
            calls=[
                ("send_email", {"to": "ops", "body": "x" * (1 << 20)}),
                ("send_email", deep),
                ("send_email", {"to": "ops"}),
            ]
        )
    )
    names, adjudications = TURNS[wire](gateway, stream)
    assert names == ["send_email"]
    big, nested, ok = (a["verdict"] for a in adjudications)
    assert (big["kind"], big["reason"]) == ("DENY", "OVERSIZE")
    assert "over the 1048576-byte limit" in big["detail"]["claim"]
    assert (nested["kind"], nested["reason"]) == ("DENY", "MALFORMED")
    assert "deeper than 64 levels" in nested["detail"]["claim"]
    assert ok["kind"] == "ALLOW"
