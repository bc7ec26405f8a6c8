"""The generated-mutant phase of a proof run (``--fak-mutate=incremental|full``).

Every process of the run generates the mutants of every anchor of every theorem
(:mod:`pytest_fak.generated`) and checks the documents' **EQUIVALENT-MUTANTS.** waivers
against them. After a witness passes, it is re-run under each generated mutant of its
theorems' anchors, except a mutant that is waived, that another witness of the same
theorem already killed (in this process, or in the cache), whose lines this witness never
executed (``uncovered``: it cannot be killed by it), or whose outcome for this witness is
cached (:mod:`pytest_fak.mutcache`). Each re-run has a deadline (a mutant that loops
forever is killed by ``timeout``); code of the mutant still running in another thread
when the deadline passes gets the same exception raised in that thread, then and every
half second until the witness has returned, so a witness whose exit waits on such a
thread (a test client joining its event-loop thread) is not stuck behind it. After every
re-run, killed or not, any other thread still running the mutant's code is stopped the
same way, so a worker the mutant never lets finish cannot spin on through later re-runs.
Each re-run also
has an address-space budget (:mod:`pytest_fak.crash`): a mutant that allocates without
bound is killed by ``memory``; one that crashes the xdist worker is killed by ``crashed``.

The controller folds the outcomes per theorem: a mutant is killed when some passing
witness failed under it; a mutant neither killed nor waived is a survivor, and a
theorem with a survivor is not PROVEN (VACUOUS, with the survivors listed).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from pytest_fak.generated import GeneratedMutant, Generation, generate
from pytest_fak.mutcache import MutantCache, witness_fingerprint
from pytest_fak.symbols import SymbolError
from pytest_fak.theorems import Theorem, TheoremError, TheoremIndex
from pytest_fak.verdicts import GEN_KILLED

__all__ = [
    "MODES",
    "TIMEOUT",
    "UNCOVERED",
    "GeneratedPhase",
    "MutantQuarantine",
    "MutantTimeout",
    "deadline",
    "interrupt_mutant",
    "stop_mutant_threads",
]

MODES = ("off", "incremental", "full")
UNCOVERED = "uncovered"
TIMEOUT = "timeout"


class MutantTimeout(BaseException):
    """Raised into a witness (and any thread running the mutant) past its deadline.

    A BaseException, so neither the witness nor Hypothesis mistakes it for a failure of
    the test's own and keeps going."""


def _holds(frame: FrameType | None, codes: set[CodeType]) -> bool:
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def _codes(code: CodeType) -> set[CodeType]:
    out = {code}
    for c in code.co_consts:
        if isinstance(c, CodeType):
            out |= _codes(c)
    return out


def _frames() -> dict[int, FrameType]:
    """``sys._current_frames()`` with the collector off. CPython 3.11 builds that dict while
    holding the runtime's thread-list lock; a collection it triggers there can free a
    ``threading.local``, whose clean-up takes the same lock: the process deadlocks (seen in
    a proof run, under a journal mutant that had leaked hundreds of threads)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return sys._current_frames()
    finally:
        if enabled:
            gc.enable()


def _interrupt_threads(codes: set[CodeType]) -> int:
    """Raise :class:`MutantTimeout` in every other thread running one of ``codes``."""
    me = threading.get_ident()
    hit = 0
    for tid, frame in _frames().items():
        if tid != me and _holds(frame, codes):
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(tid), ctypes.py_object(MutantTimeout)
            )
            hit += 1
    return hit


class _Clock:
    """The state of one :func:`deadline`: shared by the alarm handler and its watchdog."""

    def __init__(self, seconds: float, on_expiry: Callable[[], object] | None) -> None:
        self.seconds = seconds
        self.on_expiry = on_expiry
        self.stopped = False
        self.fired = 0
        self.stop = threading.Event()
        self.expired = threading.Event()
        self.watchdog: threading.Thread | None = None

    def expire(self) -> None:
        if self.on_expiry is not None:
            self.on_expiry()

    def arm(self) -> None:
        """Start the watchdog now, before the block runs: a thread started later, from the
        alarm handler, can die before it runs (no room left under the re-run's address-space
        cap, a thread-crash hook that drops its error), and ``Thread.start`` then waits for
        it for ever (seen in a proof run, in a worker that held 1,200 threads)."""
        self.watchdog = threading.Thread(target=self.watch, name="fak-mutant-watchdog", daemon=True)
        self.watchdog.start()

    def fire(self, signum: int, frame: FrameType | None) -> None:
        if self.stopped:
            return  # a late alarm while the deadline is being taken down
        self.fired += 1
        self.expire()
        self.expired.set()
        raise MutantTimeout(f"the witness ran past its {self.seconds:.1f} s deadline")

    def watch(self) -> None:
        """Past the deadline: keep stopping the mutant's code in other threads, and raise
        in the main thread again while it stays stuck (at most ``_RERAISES`` times)."""
        self.expired.wait()  # set by the alarm, or by close
        if self.stop.is_set():
            return
        main = threading.main_thread().ident
        # a main thread still inside after as long again as the deadline itself is stuck
        every = max(_MIN_ROUNDS, math.ceil(self.seconds / _GRACE))
        rounds = 0
        while not self.stop.wait(_GRACE):
            self.expire()
            rounds += 1
            if main is not None and rounds % every == 0 and self.fired <= _RERAISES:
                if self.stop.is_set():
                    return
                signal.pthread_kill(main, signal.SIGALRM)

    def close(self) -> None:
        self.stopped = True
        self.stop.set()
        self.expired.set()
        signal.setitimer(signal.ITIMER_REAL, 0)
        if self.watchdog is not None:
            self.watchdog.join()


#: seconds between the watchdog's turns once a deadline has passed
_GRACE = 0.5
#: the fewest turns of the watchdog before it raises in a main thread that is still stuck
_MIN_ROUNDS = 4
#: how many times the main thread is raised into after the first
_RERAISES = 3


@contextlib.contextmanager
def deadline(seconds: float, on_expiry: Callable[[], object] | None = None) -> Iterator[None]:
    """Raise :class:`MutantTimeout` in the main thread after ``seconds`` (elsewhere: no-op).

    ``on_expiry`` is called when the deadline passes (from the main thread's alarm), and
    again every ``_GRACE`` seconds from a watchdog thread until the block is left: it stops
    the mutant's code running in other threads. That matters when the main thread's way
    out waits on such a thread: a test client's exit joins the event-loop thread in which
    the mutant loops, so raising in the main thread alone leaves the run stuck there for
    ever. If the main thread is still inside the block as long again later (at least two
    seconds: it waits on something the stopped thread will now never do), it is raised
    into again, up to ``_RERAISES`` times."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "setitimer"
    ):
        yield
        return
    clock = _Clock(seconds, on_expiry)
    clock.arm()
    old = signal.signal(signal.SIGALRM, clock.fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        # no alarm raises from here on; the watchdog is joined before the old handler
        # is back, so none of its alarms reaches that handler
        clock.close()
        signal.signal(signal.SIGALRM, old)


class MutantQuarantine:
    """Keeps what a mutant breaks in other threads out of the witness's own report.

    A mutant can crash a thread the code starts (a journal's writer whose ``__init__`` lost
    a line) or one that was already running; pytest would report that at the witness's
    teardown as an error on the real code. While a mutant is applied, every uncaught thread
    exception and unraisable exception is dropped (counted), and threads started then are
    tagged so their later crashes are dropped too. Everything else reaches pytest as usual.
    """

    def __init__(self) -> None:
        self.dropped = 0
        self._active = False
        self._prev: Any = None

    def _hook(self, args: threading.ExceptHookArgs) -> None:
        if self._active or getattr(args.thread, "_fak_under_mutant", False):
            self.dropped += 1
            return
        self._prev(args)

    def uninstall(self) -> None:
        if self._prev is not None and threading.excepthook == self._hook:
            threading.excepthook = self._prev
        self._prev = None

    @contextlib.contextmanager
    def window(self) -> Iterator[None]:
        if threading.excepthook != self._hook:
            self._prev = threading.excepthook
            threading.excepthook = self._hook
        real_start = threading.Thread.start

        def start(thread: threading.Thread) -> None:
            thread._fak_under_mutant = True  # type: ignore[attr-defined]
            real_start(thread)

        prev_unraisable = sys.unraisablehook
        threading.Thread.start = start  # type: ignore[method-assign,assignment]
        sys.unraisablehook = self._drop
        self._active = True
        try:
            yield
        finally:
            self._active = False
            threading.Thread.start = real_start  # type: ignore[method-assign]
            sys.unraisablehook = prev_unraisable

    def _drop(self, unraisable: Any) -> None:
        self.dropped += 1


class GeneratedPhase:
    """One process's view of the generated mutants, their waivers and the cache."""

    def __init__(
        self, index: TheoremIndex, mode: str, cache_dir: Path, budget: str, build: str | None = None
    ) -> None:
        self.mode = mode
        self.budget = budget
        self.generations: dict[str, Generation] = {}
        self.errors: list[TheoremError] = []
        self.by_id: dict[str, GeneratedMutant] = {}
        self.of_theorem: dict[str, list[GeneratedMutant]] = {}
        for t in index:
            if t.scoped_out is not None:
                continue
            ms: list[GeneratedMutant] = []
            for a in t.anchors:
                g = self._generation(a.symbol)
                if g is not None:
                    ms += [m for m in g.mutants if m.id not in {x.id for x in ms}]
            self.of_theorem[t.id] = ms
            self._check_waivers(t, {m.id for m in ms})
        for ms in self.of_theorem.values():
            for m in ms:
                self.by_id[m.id] = m
        self.cache = MutantCache(cache_dir, read=mode == "incremental", plugin=build)
        self.local_kills: dict[str, set[str]] = {}
        self.witnesses_of: dict[str, list[str]] = {}
        self.fingerprints: dict[str, str] = {}
        self.hits = 0
        self.runs = 0
        self.seconds = 0.0

    def _generation(self, symbol: str) -> Generation | None:
        if symbol not in self.generations:
            try:
                self.generations[symbol] = generate(symbol)
            except SymbolError:
                return None  # the theorem loader already reported it
        return self.generations[symbol]

    def _check_waivers(self, t: Theorem, ids: set[str]) -> None:
        for w in t.equivalent:
            if w.mutant_id not in ids:
                self.errors.append(
                    TheoremError(
                        t.path,
                        w.line,
                        f"the waiver of {w.mutant_id} in {t.id} names no generated mutant of "
                        "its anchors (the code changed or the id is mistyped): remove the "
                        "waiver, or re-check the mutant and copy its current id from the report",
                    )
                )

    def anchor_shas(self) -> dict[str, str]:
        return {s: g.source_sha256 for s, g in self.generations.items()}

    # ------------------------------------------------------------------ witnesses
    def bind_items(self, items: Sequence[Any], theorems_of: Any) -> None:
        """Record every collected witness's fingerprint and theorems (for cached kills)."""
        for item in items:
            ts = theorems_of(item)
            if not ts:
                continue
            self.fingerprints[item.nodeid] = witness_fingerprint(str(item.path), self.budget)
            for t in ts:
                self.witnesses_of.setdefault(t.id, []).append(item.nodeid)

    def fingerprint(self, item: Any) -> str:
        fp = self.fingerprints.get(item.nodeid)
        if fp is None:
            fp = self.fingerprints[item.nodeid] = witness_fingerprint(str(item.path), self.budget)
        return fp

    def cached(self, m: GeneratedMutant, nodeid: str) -> str | None:
        fp = self.fingerprints.get(nodeid)
        if fp is None:
            return None
        sha = self.generations[m.symbol].source_sha256
        return self.cache.get(sha, m.id, nodeid, fp)

    def killed_for(self, t: Theorem, m: GeneratedMutant, nodeid: str) -> bool:
        """Whether another witness of ``t`` already killed ``m`` (here or in the cache)."""
        if m.id in self.local_kills.get(t.id, ()):
            return True
        return any(
            self.cached(m, other) in GEN_KILLED
            for other in self.witnesses_of.get(t.id, ())
            if other != nodeid
        )

    def plan(
        self, item: Any, theorems: Sequence[Theorem], lines: dict[str, set[int]] | None
    ) -> tuple[dict[str, str], list[GeneratedMutant], int]:
        """``(outcomes known without running, mutants to run, cache hits)`` for a witness."""
        known: dict[str, str] = {}
        todo: list[GeneratedMutant] = []
        hits = 0
        self.fingerprint(item)
        for t in theorems:
            waived = {w.mutant_id for w in t.equivalent}
            for m in self.of_theorem.get(t.id, ()):
                if m.id in known or m in todo or m.id in waived:
                    continue
                hit = self.cached(m, item.nodeid)
                if hit is not None:
                    known[m.id] = hit
                    hits += 1
                    continue
                need = [
                    x
                    for x in theorems
                    if m in self.of_theorem.get(x.id, ()) and not self.killed_for(x, m, item.nodeid)
                ]
                if not need:
                    continue
                ran = None if lines is None else lines.get(os.path.realpath(m.filename), set())
                if ran is not None and not (m.lines & ran):
                    known[m.id] = UNCOVERED
                    continue
                todo.append(m)
        return known, todo, hits

    def record_kill(self, theorems: Sequence[Theorem], mutant_id: str) -> None:
        for t in theorems:
            self.local_kills.setdefault(t.id, set()).add(mutant_id)

    def timed(self) -> _Timer:
        return _Timer(self)


class _Timer:
    def __init__(self, phase: GeneratedPhase) -> None:
        self.phase = phase
        self.start = 0.0

    def __enter__(self) -> _Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.phase.seconds += time.perf_counter() - self.start
        self.phase.runs += 1


def interrupt_mutant(m: GeneratedMutant) -> int:
    """At a deadline: raise :class:`MutantTimeout` once in every other thread running the
    mutant's code (called from a signal handler or the watchdog, so it never waits)."""
    code = m.current_code()
    return _interrupt_threads(_codes(code)) if code is not None else 0


def stop_mutant_threads(m: GeneratedMutant, rounds: int = 50, pause: float = 0.02) -> int:
    """After a re-run, whatever its outcome: stop every other thread still running the
    mutant's code, raising :class:`MutantTimeout` into it again (a mutated ``except`` may
    swallow one) until none is left or ``rounds`` pauses pass. Returns how many threads
    it raised into (0 when the re-run left none, the usual case)."""
    code = m.current_code()
    if code is None:
        return 0
    codes = _codes(code)
    hit = 0
    for _ in range(rounds):
        n = _interrupt_threads(codes)
        if not n:
            break
        hit += n
        time.sleep(pause)
    return hit
