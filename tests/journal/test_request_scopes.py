"""C1.4 (b) at the scope's edges: one request, one scope, and nothing left behind.

Written from the statement: inside one request scope at most ``max_request_bytes`` of rows
are queued (a row is its stored fields in UTF-8 plus 256 bytes), a scope once refused
queues nothing more, and rows recorded outside any scope are never refused. The gateway
opens a scope per HTTP request: a request whose one decision row is over the bound is
answered DENY/JOURNAL_DOWN, requests whose rows each fit are each decided on their own
(however many come one after the other), and once a refused scope has closed, rows outside
it are queued and committed again.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from fak_core.journal import Journal, JournalError, read_rows, request_scope
from tests.gateway.support import make_kernel
from tests.journal.test_journal import fresh

ROW = {"event": "decide", "trace": "t", "tool": "echo", "verdict": "ALLOW", "by": "floor"}
#: One of those rows as the theorem sizes it (its fields in UTF-8, plus 256 bytes).
ROW_BYTES = sum(len(v.encode()) for v in ROW.values()) + 256


@pytest.mark.fak_theorem("C1.4")
def test_a_refused_scope_leaves_nothing_behind_it(tmp_path: Path) -> None:
    """Run in a context of its own: whatever a scope leaves behind stays in it."""
    contextvars.copy_context().run(_scope_and_after, fresh(tmp_path) / "j.db")


def _scope_and_after(path: Path) -> None:
    j = Journal(path, max_request_bytes=ROW_BYTES)
    try:
        with request_scope() as receipt:
            j.record_fields(ROW)  # exactly the bound: queued
            with pytest.raises(JournalError):
                j.record_fields(ROW)
            assert receipt.refused is not None
            with pytest.raises(JournalError):
                j.sync()
        for _ in range(3):  # outside any scope: never refused
            j.record_fields(ROW)
        j.sync()
        with request_scope() as again:  # a new scope starts from nothing
            j.record_fields(ROW)
            assert again.refused is None
            j.sync()
    finally:
        j.close()
    assert len(list(read_rows(path))) == 5


@contextmanager
def gateway(tmp_path: Path, share: int) -> Iterator[TestClient]:
    """The gateway over a journal whose request share is ``share`` bytes; opened inside
    the witness, so its own measurement sees the middleware run."""
    state = GatewayState(make_kernel())
    journal = Journal(fresh(tmp_path) / "j.db", max_request_bytes=share)
    journal.attach(state.kernel)
    state.journal = journal
    try:
        with TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1") as c:
            yield c
    finally:
        journal.close()


def _verdicts(c: TestClient, n: int) -> list[tuple[str, str]]:
    out = []
    for i in range(n):
        r = c.post("/v1/fak/adjudicate", json={"tool": "echo", "trace_id": f"t-{i}"})
        assert r.status_code == 200, r.text
        v = r.json()["verdict"]
        out.append((v["kind"], v.get("reason", "")))
    return out


@pytest.mark.fak_theorem("C1.4")
def test_a_request_whose_row_is_over_its_share_is_refused(tmp_path: Path) -> None:
    with gateway(tmp_path, 100) as c:
        assert _verdicts(c, 3) == [("DENY", "JOURNAL_DOWN")] * 3


@pytest.mark.fak_theorem("C1.4")
def test_each_request_has_a_share_of_its_own(tmp_path: Path) -> None:
    with gateway(tmp_path, ROW_BYTES * 3) as c:
        assert _verdicts(c, 8) == [("ALLOW", "")] * 8
