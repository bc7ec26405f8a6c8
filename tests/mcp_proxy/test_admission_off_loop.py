"""The proxy screens a tool's result off its event loop: while a large result is being
admitted, the proxy still answers the session's other requests (issue 13)."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from fak_core import Kernel, Result, ToolCall, Verdict
from tests.mcp_proxy.conftest import POLICY, Downstream, running_proxy, session

pytestmark = pytest.mark.anyio
LARGE = 1 << 20  # a megabyte of result text


async def test_requests_are_answered_while_a_large_result_is_screened(
    downstream: Downstream, tmp_path: Path
) -> None:
    big = tmp_path / "big.txt"
    big.write_text("quarterly numbers " * (LARGE // 18), encoding="utf-8")
    entered, release = threading.Event(), threading.Event()
    released: list[bool] = []

    def slow_screen(call: ToolCall, result: Result) -> Verdict:
        # stands for a screen that takes a while on a large text: it waits (a bounded
        # time) for the test to have been answered something else meanwhile
        if len(result.payload) >= LARGE // 2:
            entered.set()
            released.append(release.wait(5))
        return Verdict.allow("slow-screen")

    kernel = Kernel(POLICY)
    kernel.add_admitter(slow_screen, 5, name="slow-screen")
    async with running_proxy([downstream.spec()], kernel=kernel) as (proxy, _):  # noqa: SIM117
        async with session(proxy) as client:  # (the session needs the proxy it opens)
            answers: dict[str, object] = {}

            async def read() -> None:
                answers["read"] = await client.call_tool("read_file", {"path": str(big)})

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(read)
                    assert await anyio.to_thread.run_sync(entered.wait, 10)
                    # the screen is running: another request is still answered
                    listed = await client.list_tools()
                    release.set()
    assert released == [True], "the proxy did not answer while it screened the result"
    assert {t.name for t in listed.tools} >= {"read_file"}
    assert "read" in answers
