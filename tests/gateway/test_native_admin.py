"""D12 on the native API's administrative routes: a reset or a policy reload is a journal
row (who, what) committed before it takes effect, and a refusal is the envelope it names.

Written from the statement (and the README's words on it): a reset is a row with event
``reset``, the trace, verdict ``RESET`` and ``by`` ``owner@address`` or
``operator@address``; a reload is a row with event ``policy_reload``, ``by``
``client@address``, verdict ``RELOADED`` with the new policy's digest and its file, or
``REFUSED`` with the reason (the file could not be used, a 400, the old policy stays);
when the journal cannot take the row, nothing changes and the answer is a 503
``journal_unavailable``. A read or reset of a trace that is not the caller's is a 403
naming ``trace_id``; one whose shared state is down a 503 ``state_unavailable``. The
expected digest is the policy module's digest of the file as this test loads it; the rows
are read back from SQLite through the journal's reader; the address is the one the
request comes from (``testclient`` under Starlette's client, none for a scope that has no
client).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from starlette.types import Message

from fak_core.gateway.app import create_app
from fak_core.gateway.sessions import Sessions
from fak_core.gateway.state import GatewayState
from fak_core.journal import Journal, read_rows
from fak_core.policy import load_policy, policy_digest
from fak_core.statedown import StateUnavailable
from tests.gateway.asgi_once import asgi_post, status_of
from tests.gateway.support import make_kernel
from tests.journal.test_journal import fresh

OPERATOR = "operator-key-for-the-admin-tests"
UNTRUSTED = {"tool": "fetch_url", "result": {"page": "hello"}}
#: The policy a reload brings in: it allows a tool the gateway tests' policy does not.
NEW_POLICY = 'allow = ["echo", "brand_new_tool"]\n'
BLANK_ROW = {"tool": "", "args_digest": "", "reason": ""}


@dataclass
class Admin:
    client: TestClient
    state: GatewayState
    journal: Path
    policy: Path

    def rows(self, event: str) -> list[dict[str, Any]]:
        return [
            {k: r[k] for k in ("event", "trace", "tool", "args_digest", "verdict", "reason", "by")}
            for r in read_rows(self.journal)
            if r["event"] == event
        ]

    def tainted(self, trace: str, token: str) -> bool:
        r = self.client.get(f"/v1/fak/trace/{trace}", headers={"X-Fak-Session": token})
        assert r.status_code == 200, r.text
        return bool(r.json()["dangerous"])

    def digest(self) -> str:
        return str(self.client.get("/healthz").json()["policy_digest"])

    def break_journal(self) -> None:
        """A real SQLite failure from outside the gateway: every insert is refused."""
        conn = sqlite3.connect(self.journal)
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON decisions "
            "BEGIN SELECT RAISE(ABORT, 'the disk refused the write'); END"
        )
        conn.commit()
        conn.close()


@contextmanager
def opened(tmp_path: Path) -> Iterator[Admin]:
    """The gateway over a journal and a policy file; its client is opened inside the
    witness itself, so the witness's own measurement sees the routes run."""
    tmp_path = fresh(tmp_path)  # a witness's re-runs share its tmp_path
    policy = tmp_path / "policy.toml"
    policy.write_text(NEW_POLICY, encoding="utf-8")
    state = GatewayState(make_kernel())
    journal = Journal(tmp_path / "j.db")
    journal.attach(state.kernel)
    state.journal = journal
    app = create_app(state, mcp=False, policy_path=policy, operator_key=OPERATOR)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        yield Admin(c, state, tmp_path / "j.db", policy)
    journal.close()


def _open(admin: Admin, trace: str) -> str:
    """Taint ``trace`` with an untrusted result; the owner's token."""
    r = admin.client.post("/v1/fak/admit", json={**UNTRUSTED, "trace_id": trace})
    assert r.status_code == 200, r.text
    return str(r.headers["x-fak-session"])


def _envelope(r: Any, status: int, code: str | None, param: str | None) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert (error["code"], error["param"]) == (code, param), error
    return str(error["message"])


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("who", ["owner", "operator"])
def test_a_reset_is_a_row_naming_who_and_then_the_trace_is_clean(tmp_path: Path, who: str) -> None:
    with opened(tmp_path) as admin:
        trace = f"t-reset-{who}"
        token = _open(admin, trace)
        assert admin.tainted(trace, token)
        headers = {"X-Fak-Session": token} if who == "owner" else {"X-Fak-Operator-Key": OPERATOR}
        r = admin.client.post(
            "/v1/fak/trace/reset", json={"trace_id": f"  {trace} "}, headers=headers
        )
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json"
        assert r.json() == {"reset": True, "trace_id": trace}
        assert r.headers["x-trace-id"] == trace
        assert admin.rows("reset") == [
            {
                **BLANK_ROW,
                "event": "reset",
                "trace": trace,
                "verdict": "RESET",
                "by": f"{who}@testclient",
            }
        ]
        assert not admin.tainted(trace, token)


@pytest.mark.fak_theorem("D12")
def test_a_reset_that_is_not_the_callers_is_a_403_and_no_row(tmp_path: Path) -> None:
    with opened(tmp_path) as admin:
        trace = "t-reset-foreign"
        token = _open(admin, trace)
        for headers in ({}, {"X-Fak-Session": "x" * 32}, {"X-Fak-Operator-Key": OPERATOR + "x"}):
            r = admin.client.post("/v1/fak/trace/reset", json={"trace_id": trace}, headers=headers)
            message = _envelope(r, 403, None, "trace_id")
            low = message.lower()
            assert trace in message and "x-fak-session" in low and "x-fak-operator-key" in low
            g = admin.client.get(f"/v1/fak/trace/{trace}", headers=headers)
            _envelope(g, 403, None, "trace_id")
        assert admin.rows("reset") == []
        assert admin.tainted(trace, token)
        blank = admin.client.post("/v1/fak/trace/reset", json={"trace_id": "  "})
        _envelope(blank, 400, None, "trace_id")


@pytest.mark.fak_theorem("D12")
def test_a_reset_the_journal_cannot_take_changes_nothing(tmp_path: Path) -> None:
    with opened(tmp_path) as admin:
        trace = "t-reset-down"
        token = _open(admin, trace)
        admin.break_journal()
        r = admin.client.post(
            "/v1/fak/trace/reset", json={"trace_id": trace}, headers={"X-Fak-Session": token}
        )
        _envelope(r, 503, "journal_unavailable", None)
        assert admin.tainted(trace, token)


@pytest.mark.fak_theorem("D12")
def test_a_reload_is_a_row_and_then_the_new_policy_runs(tmp_path: Path) -> None:
    with opened(tmp_path) as admin:
        before = admin.digest()
        expected = policy_digest(load_policy(admin.policy))
        assert expected != before
        denied = admin.client.post("/v1/fak/adjudicate", json={"tool": "brand_new_tool"})
        assert denied.json()["verdict"]["kind"] == "DENY"
        r = admin.client.post("/v1/fak/policy/reload")
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json"
        assert r.json() == {"reloaded": True, "source": str(admin.policy), "digest": expected}
        assert admin.digest() == expected
        assert admin.rows("policy_reload") == [
            {
                "event": "policy_reload",
                "trace": "",
                "tool": "",
                "args_digest": expected,
                "verdict": "RELOADED",
                "reason": str(admin.policy),
                "by": "client@testclient",
            }
        ]
        allowed = admin.client.post("/v1/fak/adjudicate", json={"tool": "brand_new_tool"})
        assert allowed.json()["verdict"]["kind"] == "ALLOW"


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("text", ["allow = 7\n", "not toml at all [[[\n", "allow = [1]\n"])
def test_a_reload_of_an_unusable_file_is_a_400_a_row_and_the_old_policy_stays(
    tmp_path: Path, text: str
) -> None:
    with opened(tmp_path) as admin:
        before = admin.digest()
        admin.policy.write_text(text, encoding="utf-8")
        r = admin.client.post("/v1/fak/policy/reload")
        message = _envelope(r, 400, None, None)
        assert message.startswith("policy not reloaded, the old one stays active: ")
        reason = message.removeprefix("policy not reloaded, the old one stays active: ")
        assert admin.digest() == before
        assert admin.rows("policy_reload") == [
            {
                "event": "policy_reload",
                "trace": "",
                "tool": "",
                "args_digest": "",
                "verdict": "REFUSED",
                "reason": reason[:200],
                "by": "client@testclient",
            }
        ]
        denied = admin.client.post("/v1/fak/adjudicate", json={"tool": "brand_new_tool"})
        assert denied.json()["verdict"]["kind"] == "DENY"


@pytest.mark.fak_theorem("D12")
def test_a_reload_the_journal_cannot_take_changes_nothing(tmp_path: Path) -> None:
    with opened(tmp_path) as admin:
        before = admin.digest()
        admin.break_journal()
        r = admin.client.post("/v1/fak/policy/reload")
        _envelope(r, 503, "journal_unavailable", None)
        assert admin.digest() == before


@pytest.mark.fak_theorem("D12")
def test_a_reload_without_a_policy_file_is_a_404_naming_the_flag() -> None:
    state = GatewayState(make_kernel())
    with TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1") as c:
        before = c.get("/healthz").json()["policy_digest"]
        r = c.post("/v1/fak/policy/reload")
        assert "--policy FILE" in _envelope(r, 404, None, None)
        assert c.get("/healthz").json()["policy_digest"] == before


class _DownSessions(Sessions):
    """An owner table whose shared store is down (what ``RedisSessions`` raises)."""

    def permits(self, trace: str, token: str | None, operator: str | None) -> str | None:
        raise StateUnavailable("shared session state unavailable: connection refused")


@pytest.mark.fak_theorem("D12")
def test_a_read_or_reset_while_the_shared_state_is_down_is_a_503() -> None:
    state = GatewayState(make_kernel())
    state.sessions = _DownSessions()
    with TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1") as c:
        r = c.post("/v1/fak/trace/reset", json={"trace_id": "t-down"})
        assert "connection refused" in _envelope(r, 503, "state_unavailable", None)
        g = c.get("/v1/fak/trace/t-down")
        _envelope(g, 503, "state_unavailable", None)


@pytest.mark.fak_theorem("D12")
def test_a_reset_from_a_scope_without_an_address_names_the_role_alone(tmp_path: Path) -> None:
    """ASGI lets a server leave out the client's address: the row names the role alone."""
    tmp_path = fresh(tmp_path)  # a witness's re-runs share its tmp_path
    state = GatewayState(make_kernel())
    journal = Journal(tmp_path / "j.db")
    journal.attach(state.kernel)
    state.journal = journal
    app = create_app(state, mcp=False, operator_key=OPERATOR)
    status = _post_without_client(app, b'{"trace_id": "t-anon"}')
    journal.close()
    assert status == 200
    rows = [r for r in read_rows(tmp_path / "j.db") if r["event"] == "reset"]
    assert [(r["trace"], r["by"]) for r in rows] == [("t-anon", "operator")]


def _post_without_client(app: Starlette, body: bytes) -> int:
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-fak-operator-key", OPERATOR.encode()),
    ]

    async def run() -> list[Message]:
        async with app.router.lifespan_context(app):
            return await asgi_post(app, "/v1/fak/trace/reset", body, headers)

    return status_of(asyncio.run(run()))
