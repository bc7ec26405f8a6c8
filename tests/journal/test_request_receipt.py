"""C1.4 (b): a request scope opened either way (``request_scope()`` or ``Journal.request()``)
is the receipt ``current_receipt()`` answers inside it, None outside, restored when a
nested one ends, carried into a copied context, and says why once it was refused.

The expected sizes are the theorem's rule computed here (each stored field in UTF-8 plus
256 bytes), never read from the journal; the refusal is seen through the journal's gate
(its DENY) and ``sync`` (its JournalError), as the theorem states them.
"""

from __future__ import annotations

import contextvars
import tempfile
from pathlib import Path

import pytest

from fak_core import Kernel, Policy, ToolCall, VerdictKind
from fak_core.journal import Journal, JournalError, current_receipt, request_scope

ROW = {"event": "decide", "trace": "tr", "tool": "x", "verdict": "ALLOW", "by": "t"}
ROW_BYTES = sum(len(v.encode()) for v in ROW.values()) + 256  # the theorem's rule


def _fresh(tmp_path: Path) -> Path:
    """A new directory on every run: proof mode re-runs a witness with the same tmp_path."""
    return Path(tempfile.mkdtemp(dir=tmp_path))


@pytest.mark.fak_theorem("C1.4")
@pytest.mark.parametrize("opener", ["request_scope", "Journal.request", "journal.request"])
def test_the_receipt_is_the_scope_it_is_asked_in(tmp_path: Path, opener: str) -> None:
    j = Journal(_fresh(tmp_path) / "j.db")
    scopes = {
        "request_scope": request_scope,
        "Journal.request": Journal.request,
        "journal.request": j.request,
    }
    open_scope = scopes[opener]
    try:
        assert current_receipt() is None
        with open_scope() as outer:
            assert current_receipt() is outer
            j.record_fields(ROW)
            assert (outer.queued_bytes, outer.refused) == (ROW_BYTES, None)
            with open_scope() as inner:
                assert inner is not outer
                assert current_receipt() is inner
                j.record_fields(ROW)
                j.record_fields(ROW)
                assert inner.queued_bytes == 2 * ROW_BYTES
            assert current_receipt() is outer
            assert outer.queued_bytes == ROW_BYTES
            assert contextvars.copy_context().run(current_receipt) is outer
        assert current_receipt() is None
        j.record_fields(ROW)  # outside any scope: counted against none
        assert outer.queued_bytes == ROW_BYTES
        assert j.sync() == 4
    finally:
        j.close()


@pytest.mark.fak_theorem("C1.4")
@pytest.mark.parametrize("rows_allowed", [0, 1, 3])
def test_the_receipt_says_why_its_scope_was_refused(tmp_path: Path, rows_allowed: int) -> None:
    j = Journal(_fresh(tmp_path) / "j.db", max_request_bytes=max(1, rows_allowed * ROW_BYTES))
    k = Kernel(Policy(allow=("x",)))
    k.register_tool("x", lambda a: "ran")
    j.attach(k, durable_dispatch=False)
    try:
        with Journal.request():
            receipt = current_receipt()
            assert receipt is not None and receipt.refused is None
            for _ in range(rows_allowed):
                j.record_fields(ROW)
            assert receipt.refused is None
            with pytest.raises(JournalError) as refused:
                j.record_fields(ROW)
            again = current_receipt()
            assert again is receipt
            assert again.refused == str(refused.value)
            assert f"{j.max_request_bytes}-byte limit per request" in again.refused
            with pytest.raises(JournalError):
                j.sync(1)
            _, verdict = k.syscall(ToolCall("x", "{}", "tr"))
            assert verdict.kind == VerdictKind.DENY and verdict.by == "journal"
        assert current_receipt() is None
        _, verdict = k.syscall(ToolCall("x", "{}", "tr"))
        assert verdict.kind == VerdictKind.ALLOW  # the refusal was that scope's only
        assert j.sync() == rows_allowed + 2  # its decision and its result's admission
    finally:
        j.close()
