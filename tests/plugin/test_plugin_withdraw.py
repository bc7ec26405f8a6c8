"""A mutant's thread blocked for good in C cannot stall the proof run.

Anchoring the journal writer thread's target (``Journal._writer``) stalled the proof run:
after a re-run, :func:`pytest_fak.mutation.stop_mutant_threads` raised ``MutantTimeout``
into a writer thread blocked in ``queue.get`` that nothing would feed again. The
exception stays pending on that thread, and CPython 3.11 keeps an interpreter-wide flag
set until it is taken; once coverage's tracer started for the next witness, the check of
that flag at a function's first instruction repeated for ever (100% CPU in
``threading.settrace``). The same thing, in a few lines, in a subprocess of its own.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from types import CodeType

import pytest

from pytest_fak import mutation

SCRIPT = textwrap.dedent(
    """
    import queue, threading, time
    import coverage
    from pytest_fak import mutation

    q = queue.Queue()

    def writer():
        q.get()  # blocked in C for good: nothing is ever queued

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    time.sleep(0.1)

    class Held:
        def current_code(self):
            return writer.__code__

    raised = mutation.stop_mutant_threads(Held(), rounds=3, pause=0.01)
    assert raised == 3, raised  # the thread held the code through every round
    cov = coverage.Coverage(data_file=None)
    cov.start()

    def f():
        return 1

    f()
    cov.stop()
    print("went on")
    """
)


@pytest.mark.fak_theorem("H1.4")
def test_a_thread_blocked_for_good_leaves_no_exception_pending_to_stall_the_tracer() -> None:
    res = _run()
    assert res.returncode == 0 and "went on" in res.stdout, res.stdout + res.stderr


def _run() -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else str(exc.stdout or "")
        return subprocess.CompletedProcess(exc.cmd, -9, out, "stalled: killed after 60 s")


@pytest.mark.fak_theorem("H1.4")
def test_an_exception_a_blocked_thread_never_took_is_withdrawn_when_it_wakes() -> None:
    """In this process: the blocked thread, fed afterwards, goes on as if nothing had been
    raised into it (before the fix it woke into the ``MutantTimeout`` left pending)."""
    q: queue.Queue[str] = queue.Queue()
    got: list[str] = []

    def writer() -> None:
        try:
            got.append(q.get())
        except BaseException as exc:  # what a pending MutantTimeout would do on waking
            got.append(type(exc).__name__)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    time.sleep(0.05)
    try:
        assert _stop(writer, rounds=3) == 3
    finally:
        q.put("row")  # wakes it, so an exception left pending is taken now, not later
        t.join(10)
    assert got == ["row"]


@pytest.mark.fak_theorem("H1.4")
def test_nothing_is_raised_when_the_mutant_is_not_applied_or_no_thread_holds_it() -> None:
    """``stop_mutant_threads`` counts the threads it raised into: none for a mutant whose
    code is not in force, none when no thread holds the code, and a thread that takes the
    exception at once is counted once, whatever the rounds left."""

    def idle() -> None:
        return None

    assert _stop(None, rounds=3) == 0
    assert _stop(idle, rounds=3) == 0
    stop = threading.Event()
    taken: list[str] = []

    def spinning() -> None:
        try:
            while not stop.is_set():
                time.sleep(0.001)
        except BaseException as exc:
            taken.append(type(exc).__name__)

    t = threading.Thread(target=spinning, daemon=True)
    t.start()
    time.sleep(0.05)
    try:
        assert _stop(spinning, rounds=5) == 1
    finally:
        stop.set()
        t.join(10)
    assert taken == ["MutantTimeout"]


class _Held:
    """Stands for a generated mutant whose code in force is ``fn``'s (none: not applied)."""

    def __init__(self, fn: Callable[[], None] | None) -> None:
        self.fn = fn

    def current_code(self) -> CodeType | None:
        return None if self.fn is None else self.fn.__code__


def _stop(fn: Callable[[], None] | None, rounds: int) -> int:
    """:func:`mutation.stop_mutant_threads` for the mutant whose code is ``fn``'s."""
    return mutation.stop_mutant_threads(_Held(fn), rounds=rounds, pause=0.01)  # type: ignore[arg-type]
