"""D9.1: a rate limit on the wire holds across turns, whatever the client does with its
trace id, session token or principal (the limit's default key is the caller)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from fak_core.kernel import Kernel
from fak_core.policy import Policy, PolicyError, load_policy
from fak_core.ratelimit import RateLimit
from tests.gateway.test_serve_hygiene import fak_serve, upstream  # noqa: F401
from tests.gateway_proxies.scripted_upstream import Script, ScriptedUpstream

#: How a client varies a request to dodge a limit.
DODGES = st.sampled_from(["none", "fresh-trace", "random-trace", "principal", "session"])


def _headers(dodge: str) -> dict[str, str]:
    if dodge == "random-trace":
        return {"X-Trace-Id": secrets.token_hex(8)}
    if dodge == "principal":
        return {"X-Fak-Principal": secrets.token_hex(8)}
    if dodge == "session":
        return {"X-Fak-Session": secrets.token_urlsafe(24)}
    return {}


@pytest.mark.fak_theorem("D9.1")
@given(st.integers(1, 4), st.lists(DODGES, min_size=1, max_size=12), st.booleans())
def test_a_limit_holds_across_turns_without_trace_ids(
    cap: int, dodges: list[str], with_key: bool
) -> None:
    policy = Policy(allow=("get_a",), rate_limit=RateLimit(cap, 60.0))
    app = create_app(
        GatewayState(Kernel(policy)), mcp=False, api_key="gw-key-123" if with_key else None
    )
    auth = {"Authorization": "Bearer gw-key-123"} if with_key else {}
    allowed = 0
    with TestClient(app, base_url="http://127.0.0.1") as c:
        for dodge in dodges:
            r = c.post(
                "/v1/fak/adjudicate", json={"tool": "get_a"}, headers={**auth, **_headers(dodge)}
            )
            assert r.status_code == 200, r.text
            verdict = r.json()["verdict"]
            if verdict["kind"] == "ALLOW":
                allowed += 1
            else:
                assert verdict["reason"] == "RATE_LIMITED"
    assert allowed == min(cap, len(dodges))


def test_an_unknown_key_is_a_clear_policy_error() -> None:
    with pytest.raises(
        PolicyError, match=r"rate_limit\.key.*credential, client, trace, tool, global"
    ):
        load_policy('{"rate_limit": {"max_calls": 1, "key": "user"}}', "json")


def test_six_proxied_turns_against_a_limit_of_two(
    tmp_path: Path,
    upstream: tuple[ScriptedUpstream, str],  # noqa: F811
) -> None:
    up, url = upstream
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"allow": ["get_a"], "rate_limit": {"max_calls": 2}}))
    with fak_serve("--upstream", url + "/v1", "--policy", str(policy)) as gw:
        client = openai.OpenAI(base_url=gw + "/v1", api_key="sk-x", max_retries=0)
        kept = 0
        for _ in range(6):  # no X-Trace-Id: every turn gets a fresh trace
            up.reset(Script(calls=[("get_a", {})]))
            out = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "go"}]
            )
            kept += len(out.choices[0].message.tool_calls or [])
        assert kept == 2
