"""A/B taint sessions in process: the A/B of ``test_taint_ab`` without sockets or SDKs.

Gateway and scripted upstream run in this process (``httpx.ASGITransport``), so the A/B is
cheap enough to re-run under every mutant of D10.2 and its code is measured. Session A's
transcript carries an untrusted ``fetch_url`` result; session B's does not. The upstream
proposes the byte-identical external ``send_email`` in both. Only the taint differs, and
only the survivors differ: A drops the call DENY/TRUST_VIOLATION, B keeps it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest

from .inprocess import in_process_gateway
from .scripted_upstream import Script
from .test_survivors_property import survivors
from .test_taint_ab import EXFIL, _anthropic_messages, _openai_messages

_UPSTREAM, _STATE, _APP = in_process_gateway()


async def _turn(wire: str, stream: bool, tainted: bool, trace: str) -> httpx.Response:
    doc: dict[str, Any] = {"model": "m", "stream": stream}
    if wire == "openai":
        path, doc["messages"] = "/v1/chat/completions", _openai_messages(tainted)
    else:
        path, doc["messages"], doc["max_tokens"] = "/v1/messages", _anthropic_messages(tainted), 8
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=_APP), base_url="http://gw"
    ) as c:
        return await c.post(path, json=doc, headers={"x-trace-id": trace})


def _fak(stream: bool, text: str) -> dict[str, Any]:
    """The gateway's ``fak`` report: the body's, or the one carried by a stream event."""
    if not stream:
        return dict(json.loads(text)["fak"])
    for line in text.splitlines():
        if line.startswith("data: {"):
            event = json.loads(line[6:])
            if "fak" in event:
                return dict(event["fak"])
    raise AssertionError("the stream carried no fak report")


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "stream"])
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.fak_theorem("D10.2")
def test_untrusted_result_drops_the_identical_egress_call_in_process(
    wire: str, stream: bool
) -> None:
    seen = {}
    for label, tainted in (("A", True), ("B", False)):
        _UPSTREAM.reset(Script(calls=[EXFIL]))
        trace = f"ab-inproc-{label}-{uuid.uuid4().hex[:8]}"
        r = asyncio.run(_turn(wire, stream, tainted, trace))
        assert r.status_code == 200, r.text
        seen[label] = (
            survivors(wire, stream, r.text),
            _fak(stream, r.text)["adjudications"],
            _STATE.kernel.taint(trace).label,
        )
    (kept_a, adj_a, taint_a), (kept_b, adj_b, taint_b) = seen["A"], seen["B"]
    # only the taint differs ...
    assert (taint_a, taint_b) == ("tainted", "trusted")
    assert adj_a[0]["args_digest"] == adj_b[0]["args_digest"]
    # ... and only the survivors differ
    assert kept_a == []
    assert kept_b == [("0", EXFIL[0], EXFIL[1])]
    va, vb = adj_a[0]["verdict"], adj_b[0]["verdict"]
    assert (va["kind"], va["reason"], adj_a[0]["admitted"]) == ("DENY", "TRUST_VIOLATION", False)
    assert (vb["kind"], adj_b[0]["admitted"]) == ("ALLOW", True)
