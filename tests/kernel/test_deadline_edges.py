"""D1.2's deadline pool at its edges: a TimeoutError of the call's own, reuse then growth,
the threads it starts, what it keeps of a returned call, a close with a worker held.

Every expectation is counted by the test itself (the calls it started, the calls its
callables saw begin, the threads alive under the pool's name, weak references to the
objects a call took and gave back), never read back from the pool's bookkeeping; the
pool's count of free workers is read only to wait until a worker has marked itself free
(a fixed sleep flakes on a loaded machine). Each pool gets a name of its own per run, so a
thread another run left behind is never counted here.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fak_core import Kernel, Policy, ToolCall
from fak_core.calls import Status
from fak_core.deadline import DeadlineExceeded, DeadlinePool

LATE = 0.05  # a deadline the hanging calls below always miss
_RUN = itertools.count(1)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Every hanging call waits on this; set at the end so no thread outlives the test."""
    event = threading.Event()
    yield event
    event.set()


def _name(tag: str) -> str:
    return f"kd-{tag}-{next(_RUN)}"


def _until(predicate: Callable[[], bool], limit: float = 3.0) -> None:
    end = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.005)


def _workers(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(name + "-") and t.is_alive()]


def _marked_free(pool: DeadlinePool) -> None:
    _until(lambda: pool._idle >= 1)


class Token:
    """An object a weak reference can watch."""


class Hang:
    """Records that it began, waits for the release, then returns a fresh Token."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.began = 0
        self.lock = threading.Lock()
        self.out: list[weakref.ref[Token]] = []

    def __call__(self, *args: Any) -> Token:
        with self.lock:
            self.began += 1
        self.release.wait(10)
        token = Token()
        self.out.append(weakref.ref(token))
        return token


def _raiser(exc: BaseException) -> Callable[..., None]:
    def fn(*args: Any) -> None:
        raise exc

    return fn


_OWN_TIMEOUTS: list[Callable[[], BaseException]] = [
    lambda: TimeoutError("the call's own"),
    lambda: DeadlineExceeded(0.25),  # a deadline of a pool the call itself uses
]


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("make", _OWN_TIMEOUTS)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_timeout_error_the_call_raises_in_time_is_its_own_answer(
    make: Callable[[], BaseException], workers: int
) -> None:
    pool = DeadlinePool(workers, _name("own"))
    try:
        exc = make()
        with pytest.raises(TimeoutError) as caught:
            pool.run(_raiser(exc), timeout=5)
        assert caught.value is exc
        exc2 = make()

        async def main() -> None:
            with pytest.raises(TimeoutError) as caught2:
                await pool.arun(_raiser(exc2), timeout=5)
            assert caught2.value is exc2

        asyncio.run(main())
        assert pool.stuck == 0
        assert pool.run(lambda: "after", timeout=5) == "after"
    finally:
        pool.close()


@pytest.mark.fak_theorem("D1.2")
def test_a_tool_raising_a_timeout_error_in_time_is_a_tool_error_not_a_timeout() -> None:
    k = Kernel(Policy(allow=("t",)), tool_timeout=5, tool_workers=1)
    k.register_tool("t", _raiser(TimeoutError("slow backend")))
    try:
        result, _ = k.syscall(ToolCall("t", "{}", "s"))
        assert result.status is Status.ERROR
        assert result.meta["error"] == "tool 't' raised TimeoutError: slow backend"
        assert (k.counters.tool_errors, k.counters.tool_timeouts, k.stuck_tools) == (1, 0, 0)
    finally:
        k.close()


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("sequential", [1, 3])
@pytest.mark.parametrize("at_once", [1, 2, 4])
def test_a_free_worker_is_reused_and_new_ones_start_only_when_none_is_free(
    release: threading.Event, workers: int, sequential: int, at_once: int
) -> None:
    name = _name("grow")
    pool = DeadlinePool(workers, name)
    hang = Hang(release)
    try:
        for i in range(sequential):
            assert pool.run(lambda v: v + 1, i, timeout=5) == i + 1
            _marked_free(pool)
            assert len(_workers(name)) == 1  # one call at a time: the free worker is reused
        futures = [pool.submit(hang) for _ in range(at_once)]
        running = min(at_once, workers)  # the free one first, then one new worker each
        _until(lambda: hang.began == running)
        assert pool.threads == running
        assert len(_workers(name)) == running
        release.set()
        assert [type(f.result(5)) for f in futures] == [Token] * at_once
        assert hang.began == at_once
        assert pool.threads == running
    finally:
        release.set()
        pool.close()


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("workers", [1, 3])
def test_the_workers_are_daemon_threads_named_in_order(
    release: threading.Event, workers: int
) -> None:
    name = _name("names")
    pool = DeadlinePool(workers, name)
    hang = Hang(release)
    try:
        for _ in range(workers):
            pool.submit(hang)
        _until(lambda: hang.began == workers)
        threads = _workers(name)
        assert sorted(t.name for t in threads) == sorted(
            f"{name}-{n}" for n in range(1, 1 + workers)
        )
        assert all(t.daemon for t in threads)
    finally:
        release.set()
        pool.close()
    _until(lambda: not _workers(name))


def _second(a: object, b: Token) -> Token:
    return b


def _gone(*refs: weakref.ref[Any]) -> Callable[[], bool]:
    def check() -> bool:
        gc.collect()
        return all(r() is None for r in refs)

    return check


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("workers", [1, 2])
def test_the_pool_keeps_nothing_of_a_call_that_returned(
    release: threading.Event, workers: int
) -> None:
    pool = DeadlinePool(workers, _name("keep"))
    try:
        arg, out = Token(), Token()
        arg_ref, out_ref = weakref.ref(arg), weakref.ref(out)
        assert pool.run(_second, arg, out, timeout=5) is out
        del arg, out
        _until(_gone(arg_ref, out_ref))

        hang = Hang(release)
        late_arg = Token()
        late_ref = weakref.ref(late_arg)
        try:
            pool.run(hang, late_arg, timeout=LATE)
        except DeadlineExceeded:
            pass
        else:  # pragma: no cover - the check below names the failure
            pytest.fail("a call still running at its deadline was answered with its value")
        del late_arg
        assert hang.began == 1
        assert pool.stuck == 1
        release.set()
        _until(lambda: pool.stuck == 0)
        _until(lambda: len(hang.out) == 1)
        _until(_gone(late_ref, hang.out[0]))  # the late value is dropped, not kept
    finally:
        release.set()
        pool.close()


@pytest.mark.fak_theorem("D1.2")
def test_closing_stops_the_free_worker_at_once_and_a_held_one_when_its_call_returns(
    release: threading.Event,
) -> None:
    name = _name("close")
    pool = DeadlinePool(2, name)
    hang = Hang(release)
    try:
        with pytest.raises(DeadlineExceeded):
            pool.run(hang, timeout=LATE)
        _until(lambda: hang.began == 1)
        assert pool.run(lambda: "second worker", timeout=5) == "second worker"
        _marked_free(pool)
        assert len(_workers(name)) == 2
        pool.close()
        _until(lambda: len(_workers(name)) == 1)  # the free worker stopped
        with pytest.raises(RuntimeError, match="closed"):
            pool.submit(print)
        assert pool.stuck == 1
        release.set()
        _until(lambda: not _workers(name))  # the held one stopped once its call returned
        assert pool.stuck == 0
    finally:
        release.set()
        pool.close()
