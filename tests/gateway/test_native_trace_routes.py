"""D12 on the native trace routes' answers: what a permitted read, reset and context say.

Written from the statement: a permitted ``GET /v1/fak/trace/{id}`` answers
``{"trace_id", "taint", "dangerous"}`` (the label, and whether it is above trusted), a
blank path id is a 400 naming ``trace_id``; a permitted reset answers
``{"reset": true, "trace_id"}``; ``POST /v1/fak/trace/context`` takes a string ``text``
(else a 400 naming ``text``) and an ``origin`` of ``user`` (the default) or ``system``
(else a 400 naming ``origin``), records the words on its trace, claims it, and answers
``{"recorded": true, "trace_id", "origin"}``. Each answer names its trace in
``X-Trace-Id`` once. A refused policy reload's row keeps the first 200 characters of the
reason. The labels and their danger are written out here, the session state
is prepared through the ledger, and the recorded words are read from a spy on the state's
recording call (the handler's only way to record).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from fak_core.policy import PolicyError, load_policy
from fak_core.taint import Taint
from tests.gateway.support import make_kernel
from tests.gateway.test_native_admin import opened

#: the wire label of each level, and whether the statement calls it dangerous
LABELS = {Taint.TRUSTED: ("trusted", False), Taint.TAINTED: ("tainted", True)}
LABELS[Taint.QUARANTINED] = ("quarantined", True)


class _SpyState(GatewayState):
    """The gateway state, keeping each ``(trace, items)`` the host records."""

    words: list[tuple[str, list[tuple[str, str]]]]

    async def record_trusted(self, trace: str, items: list[tuple[str, str]]) -> None:
        self.words.append((trace, list(items)))
        await super().record_trusted(trace, items)


def _spy() -> _SpyState:
    state = _SpyState(make_kernel())
    state.words = []
    return state


def _client(state: GatewayState) -> TestClient:
    return TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1")


def _own(c: TestClient, trace: str) -> dict[str, str]:
    """Open ``trace`` (its first use) and return the header that carries its token."""
    r = c.post("/v1/fak/adjudicate", json={"tool": "echo", "trace_id": trace})
    assert r.status_code == 200, r.text
    return {"X-Fak-Session": r.headers["x-fak-session"]}


def _refusal(r: Any, status: int, param: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]["param"] == param


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("level", list(LABELS))
def test_a_permitted_read_answers_the_label_and_its_danger(level: Taint) -> None:
    state = _spy()
    with _client(state) as c:
        own = _own(c, "t-read")
        state.kernel.ledger.raise_to("t-read", level)
        r = c.get("/v1/fak/trace/t-read", headers=own)
    label, dangerous = LABELS[level]
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"trace_id": "t-read", "taint": label, "dangerous": dangerous}
    assert r.headers.get_list("x-trace-id") == ["t-read"]


@pytest.mark.fak_theorem("D12")
def test_a_path_id_is_read_without_its_blanks() -> None:
    state = _spy()
    with _client(state) as c:
        own = _own(c, "t-blank")
        r = c.get("/v1/fak/trace/%20%09t-blank%E3%80%80", headers=own)
    assert r.status_code == 200, r.text
    assert r.json()["trace_id"] == "t-blank"


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("path", ["%20", "%09%20", "%E3%80%80"])
def test_a_blank_path_id_is_a_400_naming_the_trace(path: str) -> None:
    with _client(_spy()) as c:
        r = c.get(f"/v1/fak/trace/{path}", headers={"X-Fak-Operator-Key": "x" * 20})
    _refusal(r, 400, "trace_id")
    assert "trace id" in r.json()["error"]["message"]


@pytest.mark.fak_theorem("D12")
def test_a_read_or_reset_without_the_token_is_a_403_envelope() -> None:
    state = _spy()
    with _client(state) as c:
        _own(c, "t-mine")
        state.kernel.ledger.raise_to("t-mine", Taint.TAINTED)
        read = c.get("/v1/fak/trace/t-mine")
        reset = c.post("/v1/fak/trace/reset", json={"trace_id": "t-mine"})
    for r in (read, reset):
        assert r.status_code == 403, r.text
        assert r.headers["content-type"] == "application/json"
        assert set(r.json()) == {"error"} and r.json()["error"]["message"]
    assert state.kernel.taint("t-mine") is Taint.TAINTED


@pytest.mark.fak_theorem("D12")
def test_a_permitted_reset_answers_the_trace_it_reset() -> None:
    state = _spy()
    with _client(state) as c:
        own = _own(c, "t-reset")
        state.kernel.ledger.raise_to("t-reset", Taint.TAINTED)
        r = c.post("/v1/fak/trace/reset", json={"trace_id": "t-reset"}, headers=own)
    assert r.status_code == 200, r.text
    assert r.json() == {"reset": True, "trace_id": "t-reset"}
    assert r.headers.get_list("x-trace-id") == ["t-reset"]
    assert state.kernel.taint("t-reset") is Taint.TRUSTED


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("origin", [None, "user", "system"])
def test_context_records_the_words_of_their_origin_and_claims_the_trace(
    origin: str | None,
) -> None:
    state = _spy()
    doc: dict[str, Any] = {"trace_id": "t-ctx", "text": "the user's own words"}
    if origin is not None:
        doc["origin"] = origin
    said = origin or "user"
    with _client(state) as c:
        r = c.post("/v1/fak/trace/context", json=doc)
        assert r.status_code == 200, r.text
        token = r.headers["x-fak-session"]
        read = c.get("/v1/fak/trace/t-ctx", headers={"X-Fak-Session": token})
    assert r.json() == {"recorded": True, "trace_id": "t-ctx", "origin": said}
    assert r.headers.get_list("x-trace-id") == ["t-ctx"]
    assert state.words == [("t-ctx", [(said, "the user's own words")])]
    assert read.status_code == 200, read.text


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("text", ["absent", 7, None, ["words"], {"text": "words"}])
def test_context_without_a_string_text_is_a_400_naming_text(text: Any) -> None:
    state = _spy()
    doc: dict[str, Any] = {"trace_id": "t-ctx"}
    if text != "absent":
        doc["text"] = text
    with _client(state) as c:
        r = c.post("/v1/fak/trace/context", json=doc)
    _refusal(r, 400, "text")
    assert "'text' must be a string" in r.json()["error"]["message"]
    assert state.words == []


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("origin", ["assistant", "", "USER", 7, None])
def test_context_of_another_origin_is_a_400_naming_origin(origin: Any) -> None:
    state = _spy()
    with _client(state) as c:
        r = c.post("/v1/fak/trace/context", json={"trace_id": "t", "text": "w", "origin": origin})
    _refusal(r, 400, "origin")
    assert "'origin' must be 'user' or 'system'" in r.json()["error"]["message"]
    assert state.words == []


@pytest.mark.fak_theorem("D12")
def test_a_refused_reload_records_the_first_200_characters_of_a_long_reason(
    tmp_path: Path,
) -> None:
    """The reason is what the policy module says of the file (read here by loading it),
    cut to its first 200 characters on the row; the 400 names it whole."""
    with opened(tmp_path) as admin:
        admin.policy.write_text("k" * 240 + " = 1\n", encoding="utf-8")
        with pytest.raises(PolicyError) as refused:
            load_policy(admin.policy)
        reason = str(refused.value)
        assert len(reason) > 201
        r = admin.client.post("/v1/fak/policy/reload")
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"].endswith(reason)
        rows = admin.rows("policy_reload")
    assert [(row["verdict"], row["reason"]) for row in rows] == [("REFUSED", reason[:200])]
