"""D1.2's deadline: a late tool is an ERROR answer at its deadline, and the pool is bounded.

The kernel runs a tool under ``tool_timeout`` on a :class:`~fak_core.deadline.DeadlinePool`
of ``tool_workers`` threads; the gateway awaits the same pool from a coroutine. The claims
checked here, each against numbers the test counts itself (how many calls it started, how
many its tools saw begin, the threads alive under the pool's name): a call that finishes
in time answers its value or raises its exception; a call still running at the deadline is
answered at once (``DeadlineExceeded``; through the kernel the timeout ERROR, never an OK
result) and holds its worker, counted stuck until it returns; a call still queued at its
deadline never runs; at most ``workers`` threads are started, a new one only when none is
free; a closed pool refuses calls and its free workers stop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fak_core import Kernel, Policy, ToolCall, VerdictKind
from fak_core.calls import Status
from fak_core.deadline import DeadlineExceeded, DeadlinePool

LATE = 0.05  # a deadline the hanging calls below always miss


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Every hanging call waits on this; set at the end so no thread outlives the test."""
    event = threading.Event()
    yield event
    event.set()


def _until(predicate: Callable[[], bool], limit: float = 3.0) -> None:
    end = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.005)


def _alive(name: str) -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith(name + "-") and t.is_alive())


class Hang:
    """A callable that records it began and waits for the release."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.began = 0
        self.lock = threading.Lock()

    def __call__(self, *args: Any) -> str:
        with self.lock:
            self.began += 1
        self.release.wait(10)
        return "late value"

    def wait_began(self, count: int) -> None:
        _until(lambda: self.began == count)


def free(pool: DeadlinePool) -> None:
    """Wait until the pool's one worker has marked itself free (a fixed sleep flakes on a
    loaded machine, where the next call would then start a second worker)."""
    _until(lambda: pool._idle == 1)


def _boom(x: int) -> int:
    raise KeyError(f"k{x}")


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_in_time_answers_the_value_or_the_exception_and_reuses_a_free_worker(
    workers: int,
) -> None:
    pool = DeadlinePool(workers, "kw-val")
    try:
        for x in (0, 1, -7, 10**6):
            assert pool.run(lambda v: v * 2, x, timeout=5) == x * 2
            free(pool)  # the worker hands its answer back, then becomes free
            with pytest.raises(KeyError, match=f"k{x}"):
                pool.run(_boom, x, timeout=5)
            free(pool)
            assert pool.run(lambda: None, timeout=5) is None
            free(pool)
        assert pool.stuck == 0
        assert pool.threads == 1  # one call at a time: the free worker is reused
    finally:
        pool.close()


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize(("workers", "calls"), [(1, 1), (1, 3), (2, 2), (2, 4), (3, 5)])
def test_late_calls_hold_their_workers_and_queued_ones_never_run(
    release: threading.Event, workers: int, calls: int
) -> None:
    name = f"kw-late{workers}{calls}"
    pool = DeadlinePool(workers, name)
    hang = Hang(release)
    try:
        for i in range(calls):
            started = time.monotonic()
            with pytest.raises(DeadlineExceeded):
                pool.run(hang, timeout=LATE)
            assert time.monotonic() - started < 2, "answered far past the deadline"
            running = min(i + 1, workers)
            hang.wait_began(running)
            assert pool.stuck == running
            assert pool.threads == running
        release.set()
        _until(lambda: pool.stuck == 0)
        # the workers are free again and serve new calls; none of the queued calls ran
        assert pool.run(lambda: "again", timeout=5) == "again"
        time.sleep(0.02)
        assert hang.began == min(calls, workers)
        assert pool.threads == min(calls, workers)
        assert _alive(name) == min(calls, workers)
    finally:
        release.set()
        pool.close()
    _until(lambda: _alive(name) == 0)


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("workers", [1, 2])
def test_concurrent_calls_start_one_worker_each_up_to_the_bound(
    release: threading.Event, workers: int
) -> None:
    pool = DeadlinePool(workers, "kw-conc")
    hang = Hang(release)
    try:
        futures = [pool.submit(hang) for _ in range(workers + 2)]
        _until(lambda: hang.began == workers)
        assert pool.threads == workers
        release.set()
        assert [f.result(5) for f in futures] == ["late value"] * (workers + 2)
        assert hang.began == workers + 2  # the queued calls ran once a worker was free
        assert pool.threads == workers
    finally:
        release.set()
        pool.close()


@pytest.mark.fak_theorem("D1.2")
def test_the_coroutine_path_answers_alike(release: threading.Event) -> None:
    pool = DeadlinePool(1, "kw-async")
    hang = Hang(release)

    async def main() -> None:
        assert await pool.arun(lambda v: v + 1, 41, timeout=5) == 42
        with pytest.raises(KeyError, match="k3"):
            await pool.arun(_boom, 3, timeout=5)
        assert pool.stuck == 0
        with pytest.raises(DeadlineExceeded):
            await pool.arun(hang, timeout=LATE)
        _until(lambda: hang.began == 1)
        assert pool.stuck == 1
        with pytest.raises(DeadlineExceeded):  # queued behind the stuck one
            await pool.arun(hang, timeout=LATE)
        assert pool.stuck == 1

    try:
        asyncio.run(main())
        release.set()
        _until(lambda: pool.stuck == 0)
        assert pool.run(lambda: "again", timeout=5) == "again"
        time.sleep(0.02)
        assert hang.began == 1  # the queued call was cancelled, never run
        assert pool.threads == 1
    finally:
        release.set()
        pool.close()


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("workers", [1, 3])
def test_a_closed_pool_refuses_calls_and_its_free_workers_stop(workers: int) -> None:
    name = f"kw-close{workers}"
    pool = DeadlinePool(workers, name)
    futures = [pool.submit(time.sleep, 0.02) for _ in range(workers)]
    for f in futures:
        f.result(5)
    assert _alive(name) == workers
    pool.close()
    pool.close()  # a second close is harmless
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(print)
    _until(lambda: _alive(name) == 0)
    with pytest.raises(ValueError, match="at least 1"):
        DeadlinePool(0, name)


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("workers", [1, 2])
def test_a_late_tool_is_the_timeout_error_never_its_value(
    release: threading.Event, workers: int
) -> None:
    k = Kernel(Policy(allow=("hang", "fast")), tool_timeout=LATE, tool_workers=workers)
    hang = Hang(release)
    k.register_tool("hang", hang)
    k.register_tool("fast", lambda a: "quick")
    try:
        for i in range(workers + 1):
            result, verdict = k.syscall(ToolCall("hang", "{}", "s"))
            assert verdict.kind == VerdictKind.ALLOW
            assert result.status is Status.ERROR and result.payload == ""
            assert result.meta["error"] == f"tool 'hang' timed out after {LATE:g}s"
            hang.wait_began(min(i + 1, workers))
            assert k.stuck_tools == min(i + 1, workers)
        assert k.counters.tool_timeouts == workers + 1
        # every worker is held: even a fast tool waits in the queue and is late
        result, _ = k.syscall(ToolCall("fast", "{}", "s"))
        assert result.status is Status.ERROR
        release.set()
        _until(lambda: k.stuck_tools == 0)
        result, _ = k.syscall(ToolCall("fast", "{}", "s"))
        assert result.status is Status.OK and result.payload == "quick"
        assert hang.began == workers
    finally:
        release.set()
        k.close()
