"""A bounded pool of daemon worker threads that runs a callable under a deadline.

The kernel runs tools through one (``Kernel(tool_timeout=...)``) and the gateway runs
decisions through another (``GatewayState.decide_timeout``). A Python thread cannot be
killed: when a call outlives its deadline the caller gets :class:`DeadlineExceeded` at once,
while the call keeps its worker until it returns by itself (its value is then dropped).
:attr:`DeadlinePool.stuck` counts such workers. Once every worker is stuck, new calls wait
in the queue and miss their deadline the same way; a call that never started is cancelled
and never runs. The workers are daemon threads, so a stuck one never blocks process exit
(``concurrent.futures.ThreadPoolExecutor`` joins its workers at exit, which would).
:meth:`DeadlinePool.run` blocks its caller; :meth:`DeadlinePool.arun` awaits the same call
from a coroutine without blocking the event loop.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["DeadlineExceeded", "DeadlinePool"]

T = TypeVar("T")
_Item = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...]]


class DeadlineExceeded(TimeoutError):
    """The call did not finish within ``timeout`` seconds (it may still be running)."""

    def __init__(self, timeout: float) -> None:
        # named, not ``super()``: a mutation test can then swap this body for one without it
        TimeoutError.__init__(self, f"did not finish within {timeout:g}s")
        self.timeout = timeout


class DeadlinePool:
    """At most ``workers`` daemon threads, started on demand, named ``<name>-<n>``."""

    def __init__(self, workers: int, name: str) -> None:
        if workers < 1:
            raise ValueError(f"a deadline pool needs at least 1 worker, not {workers}")
        self.workers = workers
        self.name = name
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        # Workers that finished an item and that no submit has claimed since. Once every
        # worker is started it may count more than are free, which then decides nothing:
        # it is read only to choose between a free worker and a new one.
        self._idle = 0
        self._late: set[Future[Any]] = set()
        self._closed = False

    @property
    def stuck(self) -> int:
        """Calls that missed their deadline and are still running, each holding a worker."""
        with self._lock:
            return len(self._late)

    @property
    def threads(self) -> int:
        """Worker threads started so far (at most ``workers``)."""
        with self._lock:
            return len(self._threads)

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Queue ``fn(*args)``; a worker is started if none is free and the pool has room."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"deadline pool {self.name!r} is closed")
            if self._idle > 0:
                self._idle -= 1
            elif len(self._threads) < self.workers:
                thread = threading.Thread(
                    target=self._work, name=f"{self.name}-{len(self._threads) + 1}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            self._queue.put((future, fn, args))
        return future

    def run(self, fn: Callable[..., T], *args: Any, timeout: float) -> T:
        """``fn(*args)``'s value, or :class:`DeadlineExceeded` after ``timeout`` seconds.

        An exception ``fn`` raises is raised here.
        """
        future = self.submit(fn, *args)
        try:
            return future.result(timeout)
        except TimeoutError:  # the deadline, or a TimeoutError ``fn`` raised
            return self._overdue(future, timeout)

    async def arun(self, fn: Callable[..., T], *args: Any, timeout: float) -> T:
        """:meth:`run` for a coroutine: the event loop is not blocked while ``fn`` runs.

        A call still queued when the deadline passes (or when the awaiting task is
        cancelled) is cancelled and never runs.
        """
        future = self.submit(fn, *args)
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.wrap_future(future)
        except TimeoutError:  # the deadline, or a TimeoutError ``fn`` raised
            return self._overdue(future, timeout)

    def close(self) -> None:
        """Stop the workers once they are free; stuck ones stop when their call returns."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            count = len(self._threads)
        for _ in range(count):
            self._queue.put(None)

    def _overdue(self, future: Future[T], timeout: float) -> T:
        """At the deadline: a call still queued is cancelled and never runs; one that has
        finished (as the deadline passed, or by raising a ``TimeoutError`` itself) answers
        its value or its exception; one still running keeps its worker, counted in
        :attr:`stuck` until it returns. The queued and the running are answered
        :class:`DeadlineExceeded`."""
        if future.cancel():  # still queued (or cancelled already, by ``arun``'s timeout)
            raise DeadlineExceeded(timeout) from None
        if future.done():
            return future.result()
        with self._lock:
            self._late.add(future)
        future.add_done_callback(self._forget)  # at once, if it has finished meanwhile
        raise DeadlineExceeded(timeout) from None

    def _forget(self, future: Future[Any]) -> None:
        with self._lock:
            self._late.discard(future)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # handed to the caller, never lost
                    future.set_exception(exc)
            del item, future, fn, args  # the pool keeps nothing of a finished call
            with self._lock:
                self._idle += 1
