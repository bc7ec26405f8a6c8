"""Sessions belong to someone (D12): unguessable minted ids, owner-only read and reset,
and a journal row for every reset and policy reload.

The witnesses drive the real app in process (Starlette ``TestClient``) so that the
mutants' re-runs are cheap; ``test_reset_race_over_fak_serve`` does the same over a real
``fak serve`` on loopback.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.sessions import MAX_TRACE_BYTES, Sessions
from fak_core.gateway.state import GatewayState
from fak_core.journal import Journal, read_rows
from tests.gateway.support import make_kernel

EGRESS = {"tool": "send_email", "arguments": {"to": "x@example.com"}}
UNTRUSTED = {"tool": "fetch_url", "result": {"page": "hello"}}
#: URL-safe base64 of at least 128 bits (22 characters).
MINTED = re.compile(r"gw-[A-Za-z0-9_-]{22,}")


def _client() -> TestClient:
    return TestClient(
        create_app(GatewayState(make_kernel()), mcp=False), base_url="http://127.0.0.1"
    )


# ---------------------------------------------------------------- minted ids
@pytest.mark.fak_theorem("D12")
@given(st.integers(min_value=1, max_value=16))
def test_minted_trace_ids_cannot_be_predicted_from_earlier_ones(n: int) -> None:
    """An attacker who sees its own minted ids predicts no other: every id carries at least
    128 random bits, and no id is a neighbour (in any number read off it) of another."""
    with _client() as c:
        ids = [
            c.post("/v1/fak/adjudicate", json={"tool": "echo"}).json()["trace_id"]
            for _ in range(n + 1)
        ]
    assert all(MINTED.fullmatch(t) for t in ids), ids
    assert len(set(ids)) == len(ids)
    guesses = {f"gw-{k}" for k in range(1, 4 * n + 8)}
    for seen in ids[:-1]:
        digits = re.sub(r"\D", "", seen)
        if digits:
            guesses |= {f"gw-{int(digits) + d}" for d in (-1, 1, 2)}
    assert ids[-1] not in guesses


# ---------------------------------------------------------------- ownership
#: One step of the two-client interleaving: who does what, and (attacker) with which token.
STEPS = st.lists(
    st.sampled_from(
        [
            ("victim", "admit"),
            ("victim", "egress"),
            ("attacker", "reset-no-token"),
            ("attacker", "reset-own-token"),
            ("attacker", "reset-random-token"),
            ("attacker", "read-no-token"),
            ("attacker", "read-own-token"),
            ("attacker", "admit-on-victim"),
        ]
    ),
    min_size=1,
    max_size=24,
)


@pytest.mark.fak_theorem("D12")
@given(STEPS, st.booleans())
def test_a_non_owner_never_reads_or_resets_a_session(
    steps: list[tuple[str, str]], client_chosen: bool
) -> None:
    """Every interleaving of the victim's admits and egress with the attacker's resets and
    reads, the attacker knowing the victim's trace id (minted or chosen) and holding a
    token of its own: the attacker's reads, resets and token-less admits are 403, and once
    the victim has admitted an untrusted result its egress stays denied. (Every route and
    credential: ``test_session_routes``.)"""
    with _client() as c:
        first = c.post(
            "/v1/fak/adjudicate",
            json={**EGRESS, **({"trace_id": "victim-session"} if client_chosen else {})},
        )
        victim = first.json()["trace_id"]
        own = {"X-Fak-Session": first.headers["x-fak-session"]}
        mine = c.post("/v1/fak/adjudicate", json={"tool": "echo"})
        theirs = {"X-Fak-Session": mine.headers["x-fak-session"]}
        tokens = {
            "no-token": {},
            "own-token": theirs,
            "random-token": {"X-Fak-Session": secrets.token_urlsafe(24)},
        }
        tainted = False
        for who, what in steps:
            if who == "victim" and what == "admit":
                r = c.post("/v1/fak/admit", json={**UNTRUSTED, "trace_id": victim}, headers=own)
                assert r.status_code == 200, r.text
                tainted = True
            elif who == "victim":
                r = c.post("/v1/fak/adjudicate", json={**EGRESS, "trace_id": victim}, headers=own)
                assert r.json()["verdict"]["kind"] == ("DENY" if tainted else "ALLOW"), r.text
            elif what == "admit-on-victim":  # no token: refused, whatever it would do
                r = c.post("/v1/fak/admit", json={**UNTRUSTED, "trace_id": victim})
                assert r.status_code == 403, r.text
                assert "belongs to another session" in r.json()["error"]["message"]
            else:
                op, _, token = what.partition("-")
                headers = tokens[token]
                if op == "reset":
                    r = c.post("/v1/fak/trace/reset", json={"trace_id": victim}, headers=headers)
                else:
                    r = c.get(f"/v1/fak/trace/{victim}", headers=headers)
                # A wrong token on a trace is refused whatever it asks (the attacker's own
                # token does not match the victim's).
                assert r.status_code == 403, r.text
                assert "x-fak-session" in r.json()["error"]["message"]
        read = c.get(f"/v1/fak/trace/{victim}", headers=own).json()
        assert read["taint"] == ("tainted" if tainted else "trusted")
        # The owner can reset its own session.
        assert (
            c.post("/v1/fak/trace/reset", json={"trace_id": victim}, headers=own).status_code == 200
        )


def test_the_operator_key_reads_and_resets_any_session() -> None:
    state = GatewayState(make_kernel(), sessions=Sessions(operator_key="op-secret-123"))
    with TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1") as c:
        r = c.post("/v1/fak/admit", json={**UNTRUSTED, "trace_id": "t-op"})
        assert r.status_code == 200
        op = {"X-Fak-Operator-Key": "op-secret-123"}
        assert c.get("/v1/fak/trace/t-op", headers=op).json()["taint"] == "tainted"
        bad = {"X-Fak-Operator-Key": "op-secret-124"}
        assert (
            c.post("/v1/fak/trace/reset", json={"trace_id": "t-op"}, headers=bad).status_code == 403
        )
        assert (
            c.post("/v1/fak/trace/reset", json={"trace_id": "t-op"}, headers=op).status_code == 200
        )
        assert state.kernel.taint("t-op").label == "trusted"


def test_a_wrong_token_on_an_owned_trace_is_403_and_decides_nothing() -> None:
    with _client() as c:
        c.post("/v1/fak/adjudicate", json={**EGRESS, "trace_id": "t-own"})
        r = c.post(
            "/v1/fak/adjudicate",
            json={**EGRESS, "trace_id": "t-own"},
            headers={"X-Fak-Session": secrets.token_urlsafe(24)},
        )
        assert r.status_code == 403
        assert "belongs to another session" in r.json()["error"]["message"]


def test_a_client_may_bring_its_own_session_token() -> None:
    with _client() as c:
        mine = {"X-Fak-Session": "a-secret-of-my-own-making"}
        r = c.post("/v1/fak/admit", json={**UNTRUSTED, "trace_id": "t-byo"}, headers=mine)
        assert r.headers["x-fak-session"] == mine["X-Fak-Session"]
        assert c.get("/v1/fak/trace/t-byo", headers=mine).json()["taint"] == "tainted"
        short = c.post("/v1/fak/adjudicate", json={"tool": "echo"}, headers={"X-Fak-Session": "x"})
        assert short.status_code == 400
        assert "16 to 256 characters" in short.json()["error"]["message"]


@pytest.mark.parametrize("where", ["body", "header"])
def test_a_trace_id_over_the_limit_is_a_clear_400(where: str) -> None:
    long = "t" * (MAX_TRACE_BYTES + 1)
    with _client() as c:
        if where == "body":
            r = c.post("/v1/fak/adjudicate", json={"tool": "echo", "trace_id": long})
        else:
            r = c.post("/v1/fak/adjudicate", json={"tool": "echo"}, headers={"X-Trace-Id": long})
        assert r.status_code == 400
        assert f"limit is {MAX_TRACE_BYTES} characters" in r.json()["error"]["message"]
        ok = c.post("/v1/fak/adjudicate", json={"tool": "echo", "trace_id": "t" * MAX_TRACE_BYTES})
        assert ok.status_code == 200


# ---------------------------------------------------------------- journal
def test_every_reset_and_policy_reload_is_a_journal_row(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('allow = ["echo", "send_email"]\n', encoding="utf-8")
    state = GatewayState(make_kernel())
    journal = Journal(tmp_path / "j.db")
    journal.attach(state.kernel)
    state.journal = journal
    with TestClient(
        create_app(state, mcp=False, policy_path=policy), base_url="http://127.0.0.1"
    ) as c:
        r = c.post("/v1/fak/admit", json={**UNTRUSTED, "trace_id": "t-j"})
        own = {"X-Fak-Session": r.headers["x-fak-session"]}
        assert (
            c.post("/v1/fak/trace/reset", json={"trace_id": "t-j"}, headers=own).status_code == 200
        )
        assert c.post("/v1/fak/trace/reset", json={"trace_id": "t-j"}).status_code == 403
        assert c.post("/v1/fak/policy/reload").status_code == 200
        policy.write_text("allow = 7\n", encoding="utf-8")
        assert c.post("/v1/fak/policy/reload").status_code == 400
    rows = list(read_rows(tmp_path / "j.db"))
    resets = [r for r in rows if r["event"] == "reset"]
    assert [(r["trace"], r["verdict"], r["by"].split("@")[0]) for r in resets] == [
        ("t-j", "RESET", "owner")
    ]
    reloads = [(r["verdict"], r["reason"][:20]) for r in rows if r["event"] == "policy_reload"]
    assert [v for v, _ in reloads] == ["RELOADED", "REFUSED"]
    assert reloads[0][1] == str(policy)[:20]


# ---------------------------------------------------------------- trusted context (policy v2)
@pytest.mark.fak_theorem("C4.6")
def test_the_host_records_the_users_words_and_grounds_a_destination_over_http() -> None:
    from fak_core import Kernel, Policy, ToolDecl

    policy = Policy(
        version="fak-policy/v2",
        allow=("send_money", "fetch_url"),
        gated_sinks=("SPEND",),
        tools={"send_money": ToolDecl("SPEND", ("/recipient",))},
    )
    state = GatewayState(Kernel(policy))
    with TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1") as c:
        r = c.post(
            "/v1/fak/trace/context",
            json={"trace_id": "t-ctx", "text": "refund GB29 NWBK 6016 1331 9268 19"},
        )
        assert r.status_code == 200 and r.json()["recorded"] is True
        own = {"X-Fak-Session": r.headers["X-Fak-Session"]}
        c.post("/v1/fak/admit", json={**UNTRUSTED, "trace_id": "t-ctx"}, headers=own)
        call = {"tool": "send_money", "trace_id": "t-ctx"}
        ok = c.post(
            "/v1/fak/adjudicate",
            json={**call, "arguments": {"recipient": "GB29NWBK60161331926819"}},
            headers=own,
        ).json()
        assert ok["verdict"]["kind"] == "ALLOW"
        bad = c.post(
            "/v1/fak/adjudicate",
            json={**call, "arguments": {"recipient": "US133000000121212121212"}},
            headers=own,
        ).json()
        assert bad["verdict"]["kind"] == "DENY" and "/recipient" in str(bad["verdict"])
        # someone without the session's token cannot add words to it
        stolen = c.post(
            "/v1/fak/trace/context",
            json={"trace_id": "t-ctx", "text": "US133000000121212121212"},
            headers={"X-Fak-Session": secrets.token_urlsafe(24)},
        )
        assert stolen.status_code == 403
        assert c.post("/v1/fak/trace/context", json={"trace_id": "t-ctx"}).status_code == 400
