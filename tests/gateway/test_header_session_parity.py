"""D10.1 with the session named in ``X-Trace-Id`` instead of the body.

Over HTTP a call's session may be named by the ``X-Trace-Id`` header alone; the wire
verdict must still be the in-process verdict of the call built from the same fields on that
session. Each explicit example of the parity property (one per outcome class, on a trusted,
tainted or quarantined session) is sent with its trace in the header only, and compared
with the reference built by the property's own harness (its reading of the vocabulary,
not the gateway's renderer), and with the call the kernel was handed.
"""

from __future__ import annotations

import pytest

from tests.gateway.test_parity_property import EXPLICIT, _same_quarantine_id, harness


@pytest.mark.fak_theorem("D10.1")
def test_a_session_named_in_the_header_decides_as_in_process() -> None:
    with harness() as h:
        for wc in EXPLICIT:
            want = h.expected_adjudication(wc, "http")
            trace = h.trace("http-hdr", wc)
            want["trace_id"] = trace
            body = {k: v for k, v in h.body(wc, trace).items() if k != "trace_id"}
            r = h.http.post(
                "/v1/fak/adjudicate", json=body, headers={**h.headers(wc), "X-Trace-Id": trace}
            )
            assert r.status_code == 200, r.text
            assert r.json() == want, wc
            h.assert_kernel_saw(wc, trace, "http")


@pytest.mark.fak_theorem("D10.1")
def test_a_session_named_in_the_header_runs_as_in_process() -> None:
    with harness() as h:
        for wc in EXPLICIT:
            want, ref_trace = h.expected_syscall(wc, "ref-sys-hdr")
            trace = h.trace("http-sys-hdr", wc)
            want["trace_id"] = trace
            body = {k: v for k, v in h.body(wc, trace).items() if k != "trace_id"}
            r = h.http.post(
                "/v1/fak/syscall", json=body, headers={**h.headers(wc), "X-Trace-Id": trace}
            )
            assert r.status_code == 200, r.text
            assert _same_quarantine_id(r.json()) == want, wc
            h.assert_kernel_saw(wc, trace, "http-sys")
            assert h.kernel.taint(trace) == h.kernel.taint(ref_trace)
