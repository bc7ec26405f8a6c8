"""The embedded scripted planner: its rules file, its wire conformance, and the offline gateway."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fak_core import Kernel
from fak_core.gateway import (
    GatewayState,
    PlannerError,
    default_planner,
    load_planner,
    parse_planner,
    planner_app,
)
from pytest_fak.fixtures import serve_app

from .clients import anthropic_client, openai_client
from .conftest import gateway_app


@pytest.fixture(scope="module")
def offline_gateway() -> Iterator[tuple[str, GatewayState]]:
    """A gateway with no upstream configured (the planner answers), default policy."""
    state = GatewayState(Kernel())
    with serve_app(gateway_app(state, None)) as url:
        yield url, state


def test_default_rules_load_and_route_by_text() -> None:
    p = default_planner()
    assert [c.name for c in p.reply("what is the weather").tool_calls] == ["get_weather"]
    assert [c.name for c in p.reply("please E-MAIL it").tool_calls] == ["send_email"]
    assert p.reply("hello").tool_calls == ()
    assert "scripted planner" in p.reply("hello").text


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ([], "JSON object"),
        ({"rulez": []}, "unknown key 'rulez'"),
        ({"version": "v9"}, "version"),
        ({"rules": [{"when": {}, "text": "x"}]}, "rules[0].when"),
        ({"rules": [{"when": {"regex": "("}, "text": "x"}]}, "invalid pattern"),
        ({"rules": [{"when": {"contains": "a"}}]}, "needs 'text' or 'tool_calls'"),
        (
            {"rules": [{"when": {"contains": "a"}, "tool_calls": [{"arguments": {}}]}]},
            "tool_calls[0]",
        ),
        (
            {"rules": [{"when": {"contains": "a"}, "tool_calls": [{"name": "x", "arguments": 3}]}]},
            "arguments",
        ),
    ],
)
def test_bad_rules_are_refused_with_the_key(doc: object, fragment: str) -> None:
    with pytest.raises(PlannerError, match=None) as exc:
        parse_planner(doc)
    assert fragment in str(exc.value)


def test_toml_rules_file(tmp_path: Path) -> None:
    f = tmp_path / "rules.toml"
    f.write_text(
        'version = "fak-planner/v1"\n[[rules]]\nwhen = {regex = "(?i)ping"}\ntext = "pong"\n'
        '[[rules.tool_calls]]\nname = "get_x"\narguments = {a = 1}\n'
    )
    reply = load_planner(f).reply("PING?")
    assert reply.text == "pong"
    assert reply.tool_calls[0].arguments == {"a": 1}
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(PlannerError, match="not valid JSON"):
        load_planner(bad)


def test_planner_speaks_both_wires_to_the_official_sdks() -> None:
    """The planner served directly (no gateway): the SDKs parse every frame it sends."""
    with serve_app(planner_app()) as url:
        oa = openai_client(url).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "weather?"}]
        )
        assert oa.choices[0].message.tool_calls[0].function.name == "get_weather"  # type: ignore[index]
        chunks = list(
            openai_client(url).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "weather?"}], stream=True
            )
        )
        args = "".join(
            tc.function.arguments or ""
            for ch in chunks
            for c in ch.choices
            for tc in c.delta.tool_calls or []
            if tc.function
        )
        assert json.loads(args) == {"city": "Paris"}
        with anthropic_client(url).messages.stream(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "weather?"}]
        ) as s:
            final = s.get_final_message()
        assert [(b.type, getattr(b, "input", None)) for b in final.content] == [
            ("text", None),
            ("tool_use", {"city": "Paris"}),
        ]


@pytest.mark.parametrize("stream", [False, True])
def test_offline_gateway_runs_the_same_adjudication(
    offline_gateway: tuple[str, GatewayState], stream: bool
) -> None:
    url, _ = offline_gateway
    c = openai_client(url)
    msgs = [{"role": "user", "content": "what's the weather"}]
    if stream:
        names = [
            tc.function.name
            for ch in c.chat.completions.create(model="m", messages=msgs, stream=True)
            for cc in ch.choices
            for tc in cc.delta.tool_calls or []
            if tc.function
        ]
    else:
        names = [
            t.function.name
            for t in c.chat.completions.create(model="m", messages=msgs)
            .choices[0]
            .message.tool_calls
            or []
        ]
    assert names == ["get_weather"]  # the default policy allows get_*
    msg = anthropic_client(url).messages.create(
        model="m", max_tokens=8, messages=[{"role": "user", "content": "send it by email"}]
    )
    assert msg.stop_reason == "end_turn"  # send_email is not in the default policy
    assert "send_email: DENY (DEFAULT_DENY/TERMINAL)" in msg.content[-1].text  # type: ignore[union-attr]
