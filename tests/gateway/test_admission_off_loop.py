"""``fak serve`` screens an admitted result off its event loop: ``/healthz`` answers while
a result as large as the body limit allows is being screened (issue 13)."""

from __future__ import annotations

import threading

import httpx

from fak_core import Kernel, Policy, Result, ToolCall, Verdict
from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from pytest_fak.fixtures import serve_app


def test_healthz_answers_while_a_maximal_result_is_screened() -> None:
    state = GatewayState(Kernel(Policy(allow=("read",))))
    # the largest result text a body under max_body can carry (JSON framing aside)
    text = "x" * (state.max_body - 4096)
    entered, release = threading.Event(), threading.Event()
    released: list[bool] = []

    def slow_screen(call: ToolCall, result: Result) -> Verdict:
        # stands for a screen that takes a while on a maximal text: it waits (a bounded
        # time) for /healthz to have been answered meanwhile
        if len(result.payload) >= len(text):
            entered.set()
            released.append(release.wait(5))
        return Verdict.allow("slow-screen")

    state.kernel.add_admitter(slow_screen, 5, name="slow-screen")
    with serve_app(create_app(state)) as url, httpx.Client(base_url=url, timeout=30) as http:
        answer: dict[str, httpx.Response] = {}

        def admit() -> None:
            answer["admit"] = http.post("/v1/fak/admit", json={"tool": "read", "result": text})

        worker = threading.Thread(target=admit)
        worker.start()
        assert entered.wait(10), "the result never reached the screen"
        health = http.get("/healthz")  # the screen is running
        release.set()
        worker.join(30)
    assert released == [True], "/healthz was not answered while the result was screened"
    assert health.status_code == 200
    assert answer["admit"].status_code == 200
    # admitted (paged out: the text is over the screen's page-out size), not refused
    assert answer["admit"].json()["verdict"]["kind"] == "TRANSFORM"
