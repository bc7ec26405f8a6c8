"""The deadline pool and ``Kernel(tool_timeout=...)``: a late call is an answer, not a hang."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from fak_core import Kernel, ToolCall, parse_policy
from fak_core.calls import Status
from fak_core.deadline import DeadlineExceeded, DeadlinePool

SHORT = 0.2


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event every hanging callable waits on; set at test end so no thread outlives it."""
    event = threading.Event()
    yield event
    event.set()


def wait_until(predicate: object, limit: float = 5.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_pool_returns_values_and_reraises_errors() -> None:
    pool = DeadlinePool(2, "t")
    try:
        assert pool.run(lambda x: x * 2, 21, timeout=5) == 42

        def boom() -> None:
            raise KeyError("k")

        with pytest.raises(KeyError):
            pool.run(boom, timeout=5)
        assert pool.stuck == 0
        assert pool.threads == 1  # the free worker was reused
    finally:
        pool.close()


def test_pool_late_call_is_counted_stuck_until_it_returns(release: threading.Event) -> None:
    pool = DeadlinePool(1, "t")
    try:
        with pytest.raises(DeadlineExceeded, match=r"0\.2s"):
            pool.run(release.wait, timeout=SHORT)
        assert pool.stuck == 1
        # the only worker is stuck: a queued call misses its deadline and never starts
        ran = threading.Event()
        with pytest.raises(DeadlineExceeded):
            pool.run(ran.set, timeout=SHORT)
        release.set()
        wait_until(lambda: pool.stuck == 0)
        assert pool.run(lambda: "again", timeout=5) == "again"
        assert not ran.is_set(), "a call that missed its deadline before starting ran later"
    finally:
        pool.close()


def test_pool_bounds_its_threads(release: threading.Event) -> None:
    pool = DeadlinePool(3, "t")
    try:
        for _ in range(5):
            with pytest.raises(DeadlineExceeded):
                pool.run(release.wait, timeout=0.05)
        assert pool.threads == 3
        assert pool.stuck == 3
    finally:
        release.set()
        pool.close()


def test_pool_rejects_zero_workers_and_use_after_close() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        DeadlinePool(0, "t")
    pool = DeadlinePool(1, "t")
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(print)


def allowing_kernel(release: threading.Event, timeout: float | None = SHORT) -> Kernel:
    k = Kernel(parse_policy({"version": "fak-policy/v1", "allow": ["hang", "fast", "boom"]}))
    k.tool_timeout = timeout
    k.register_tool("hang", lambda args: release.wait())
    k.register_tool("fast", lambda args: {"ok": args.get("n", 0)})

    def boom(args: dict[str, object]) -> None:
        raise RuntimeError("tool failed")

    k.register_tool("boom", boom)
    return k


def test_hanging_tool_is_an_error_result_within_the_timeout(release: threading.Event) -> None:
    k = allowing_kernel(release)
    try:
        started = time.monotonic()
        result, verdict = k.syscall(ToolCall("hang", "{}", "t1"))
        elapsed = time.monotonic() - started
        assert verdict.kind.name == "ALLOW"  # the call was allowed; the tool was late
        assert result.status is Status.ERROR
        assert result.meta["error"] == "tool 'hang' timed out after 0.2s"
        assert elapsed < 5, "the syscall waited far past its timeout"
        assert k.counters.tool_timeouts == 1
        assert k.stuck_tools == 1
        # the kernel keeps serving: other tools run (another worker), errors stay errors
        ok, _ = k.syscall(ToolCall("fast", '{"n": 3}', "t1"))
        assert ok.status is Status.OK and ok.payload == '{"ok":3}'
        err, _ = k.syscall(ToolCall("boom", "{}", "t1"))
        assert err.status is Status.ERROR and "RuntimeError: tool failed" in err.meta["error"]
        release.set()
        wait_until(lambda: k.stuck_tools == 0)
    finally:
        release.set()
        k.close()


def test_no_timeout_runs_the_tool_inline() -> None:
    k = Kernel(parse_policy({"version": "fak-policy/v1", "allow": ["who"]}))
    k.register_tool("who", lambda args: threading.current_thread().name)
    result, _ = k.syscall(ToolCall("who", "{}", "t"))
    assert result.payload == threading.current_thread().name
    k.tool_timeout = 5
    result, _ = k.syscall(ToolCall("who", "{}", "t"))
    assert result.payload.startswith("fak-tool-")
    k.close()


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan")])
def test_tool_timeout_must_be_a_positive_finite_number(bad: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        Kernel(tool_timeout=bad)


def test_arun_awaits_values_and_reraises_errors() -> None:
    pool = DeadlinePool(2, "t")

    async def main() -> None:
        assert await pool.arun(lambda x: x * 2, 21, timeout=5) == 42

        def boom() -> None:
            raise KeyError("k")

        with pytest.raises(KeyError):
            await pool.arun(boom, timeout=5)

    try:
        asyncio.run(main())
        assert pool.stuck == 0
    finally:
        pool.close()


def test_arun_late_call_is_stuck_and_the_loop_keeps_running(release: threading.Event) -> None:
    pool = DeadlinePool(1, "t")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ran = threading.Event()

    async def main() -> None:
        task = asyncio.create_task(ticker())
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded, match=r"0\.2s"):
            await pool.arun(release.wait, timeout=SHORT)
        assert time.monotonic() - started < 2
        assert pool.stuck == 1
        # the only worker is stuck: a queued call misses its deadline and never starts
        with pytest.raises(DeadlineExceeded):
            await pool.arun(ran.set, timeout=SHORT)
        task.cancel()
        assert not ran.is_set()

    try:
        asyncio.run(main())
        assert ticks >= 10  # the event loop was not blocked while the calls waited
        release.set()
        wait_until(lambda: pool.stuck == 0)
        time.sleep(0.05)
        assert not ran.is_set()  # the cancelled call did not run once the worker was free
        assert pool.threads == 1
    finally:
        pool.close()
