"""The generated-mutant phase of a proof run (``--fak-mutate=incremental|full``).

Every process of the run generates the mutants of every anchor of every theorem
(:mod:`pytest_fak.generated`) and checks the waivers against them: the documents'
**EQUIVALENT-MUTANTS.** lists and the ``# pragma: fak-equivalent`` comments in the code.
After a witness passes, it is re-run under each generated mutant of its theorems'
anchors, except a mutant that is waived, that another witness of the same theorem
already killed (in this process, or in the cache), whose lines this witness never
executed (``uncovered``: it cannot be killed by it), or whose outcome for this witness
is cached (:mod:`pytest_fak.mutcache`). Each re-run has a deadline (a mutant that loops
forever is killed by ``timeout``); code of the mutant still running in another thread
when the deadline passes gets the same exception raised in that thread, then and every
half second until the witness has returned, so a witness whose exit waits on such a
thread (a test client joining its event-loop thread) is not stuck behind it. After every
re-run, killed or not, any other thread still running the mutant's code is stopped the
same way, so a worker the mutant never lets finish cannot spin on through later re-runs.
Each re-run also has an address-space budget (:mod:`pytest_fak.crash`): a mutant that
allocates without bound is killed by ``memory``; one that crashes the xdist worker is
killed by ``crashed``.

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
from typing import TYPE_CHECKING, Any

from pytest_fak.fingerprint import Blocks
from pytest_fak.mutcache import MutantCache, mutant_key
from pytest_fak.symbols import SymbolError
from pytest_fak.theorems import Theorem, TheoremError, TheoremIndex
from pytest_fak.waivers import stale_reason

if TYPE_CHECKING:  # libcst (the mutate extra) is imported only by a generated phase
    from pytest_fak.generated import GeneratedMutant, Generation

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
    "withdraw",
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


def _interrupt_threads(codes: set[CodeType], grace: float = 0.02) -> list[int]:
    """Raise :class:`MutantTimeout` in every other thread running one of ``codes``, give
    them ``grace`` seconds to take it, then withdraw it from those that did not
    (:func:`withdraw`); the ids of the threads raised into.

    CPython 3.11 keeps one interpreter-wide "asynchronous exception pending" flag, set by
    the raise and cleared by the thread that takes the exception. While it is set, a
    thread with a tracer (coverage's) loops for ever at its next call or loop, and a
    thread blocked in C (a queue's ``get`` that nothing will feed) never takes its
    exception: the proof run stalled at 100% in ``threading.settrace``. So the raising
    thread runs untraced until the flag is clear, and no exception outlives the grace: a
    thread running Python takes it at once, a blocked one never would."""
    me = threading.get_ident()
    targets = [t for t, frame in _frames().items() if t != me and _holds(frame, codes)]
    if not targets:
        return targets
    tracer = sys.gettrace()
    sys.settrace(None)
    try:
        for tid in targets:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(tid), ctypes.py_object(MutantTimeout)
            )
        time.sleep(grace)
        withdraw(targets)
    finally:
        sys.settrace(tracer)
    return targets


class _Settled(BaseException):
    """Raised into the calling thread once, by :func:`withdraw`, to clear the flag."""


def withdraw(tids: list[int]) -> None:
    """Take back the :class:`MutantTimeout` still pending on each of ``tids`` (none, for a
    thread that took it), then clear the interpreter's flag: one exception is raised into
    this thread and taken here (see :func:`_interrupt_threads`). Call it untraced."""
    for tid in tids:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), None)
    me = ctypes.c_ulong(threading.get_ident())
    try:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(me, ctypes.py_object(_Settled))
        for _ in range(1_000_000):  # a loop's jump back takes the pending exception
            pass
    except _Settled:
        return
    ctypes.pythonapi.PyThreadState_SetAsyncExc(me, None)  # pragma: no cover - never seen


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
            # what the re-run leaked (a client its mutant never closed) is finalized here,
            # inside the window, not in a later witness's teardown, where a finalizer's
            # warning would read as that witness's error; the young generations only (a
            # full collection costs ~0.1 s in a loaded worker, ten thousand times a run)
            gc.collect(1)
            self._active = False
            threading.Thread.start = real_start  # type: ignore[method-assign]
            sys.unraisablehook = prev_unraisable

    def _drop(self, unraisable: Any) -> None:
        self.dropped += 1


class GeneratedPhase:
    """One process's view of the generated mutants, their waivers and the cache."""

    def __init__(
        self,
        index: TheoremIndex,
        mode: str,
        cache_dir: Path,
        budget: str,
        blocks: Blocks,
        own_code: Callable[[str], bool] | None = None,
    ) -> None:
        """``own_code(filename)``: whether an anchor in that file is the user's to mutate
        (default: every anchor is); the others are left out, listed in
        :attr:`left_out`."""
        self.mode = mode
        #: anchor symbol → its module, for each anchor left out (code the user does not own)
        self.left_out: dict[str, str] = {}
        self.budget = budget
        self.generations: dict[str, Generation] = {}
        self.errors: list[TheoremError] = []
        self.by_id: dict[str, GeneratedMutant] = {}
        self.of_theorem: dict[str, list[GeneratedMutant]] = {}
        #: theorem id → {mutant id: reason}: the waivers of its current mutants, from its
        #: document and from its anchors' ``# pragma: fak-equivalent`` comments (the plan
        #: and the verdict both read this)
        self.waived: dict[str, dict[str, str]] = {}
        #: theorem id → {mutant id: "document" | "code"}: where each waiver is written
        self.waiver_source: dict[str, dict[str, str]] = {}
        #: theorem id → what makes it ERROR: a stale waiver, a malformed pragma
        self.problems: dict[str, list[str]] = {}
        for t in index:
            if t.scoped_out is not None:
                continue
            ms: list[GeneratedMutant] = []
            for a in t.anchors:
                if own_code is not None and a.filename and not own_code(a.filename):
                    self.left_out[a.symbol] = a.symbol.split(":", 1)[0]
                    continue
                g = self._generation(a.symbol)
                if g is not None:
                    ms += [m for m in g.mutants if m.id not in {x.id for x in ms}]
            self.of_theorem[t.id] = ms
            self._check_waivers(t, ms)
        for ms in self.of_theorem.values():
            for m in ms:
                self.by_id[m.id] = m
        self.cache = MutantCache(cache_dir, budget, blocks, read=mode == "incremental")
        self.local_kills: dict[str, set[str]] = {}
        self.witnesses_of: dict[str, list[str]] = {}
        #: node id → the fingerprint of its run on the real code in this process
        self.fingerprints: dict[str, str] = {}
        self.hits = 0
        self.runs = 0
        self.seconds = 0.0

    def _generation(self, symbol: str) -> Generation | None:
        from pytest_fak.generated import generate

        if symbol not in self.generations:
            try:
                self.generations[symbol] = generate(symbol)
            except SymbolError:
                return None  # the theorem loader already reported it
        return self.generations[symbol]

    def _check_waivers(self, t: Theorem, ms: list[GeneratedMutant]) -> None:
        """``t``'s waivers: its anchors' pragmas, then its document's (which win). A waiver
        naming no current mutant, or a malformed pragma, is a problem of ``t`` alone (its
        verdict is ERROR); the other theorems' verdicts go on."""
        ids = {m.id for m in ms}
        waived = self.waived[t.id] = {}
        source = self.waiver_source[t.id] = {}
        problems = self.problems[t.id] = []
        for a in t.anchors:
            g = self.generations.get(a.symbol)
            problems += g.problems if g is not None else ()
        for m in ms:
            if m.pragma is not None:
                waived[m.id], source[m.id] = m.pragma, "code"
        for w in t.equivalent:
            if w.mutant_id in ids:
                waived[w.mutant_id], source[w.mutant_id] = w.reason, "document"
        problems += [stale_reason(t, w, ms, waived) for w in t.equivalent if w.mutant_id not in ids]

    def anchor_shas(self) -> dict[str, str]:
        return {s: g.source_sha256 for s, g in self.generations.items()}

    # ------------------------------------------------------------------ witnesses
    def bind_items(self, items: Sequence[Any], theorems_of: Any) -> None:
        """Record every collected witness's theorems (for the kills of the others)."""
        for item in items:
            for t in theorems_of(item) or ():
                self.witnesses_of.setdefault(t.id, []).append(item.nodeid)

    def key(self, m: GeneratedMutant) -> str:
        """The cache key of ``m``: its id and its anchor's source hash."""
        return mutant_key(m.id, self.generations[m.symbol].source_sha256)

    def cached(self, m: GeneratedMutant, nodeid: str) -> str | None:
        """``nodeid``'s cached outcome under ``m``, while its fingerprint holds: the one
        of its run in this process when there was one, else the recorded one re-checked."""
        return self.cache.get(self.key(m), nodeid, self.fingerprints.get(nodeid))

    def killed_for(self, t: Theorem, m: GeneratedMutant, nodeid: str) -> bool:
        """Whether another witness of ``t`` already killed ``m`` (here or in the cache)."""
        if m.id in self.local_kills.get(t.id, ()):
            return True
        others = [o for o in self.witnesses_of.get(t.id, ()) if o != nodeid]
        return self.cache.killed_by(self.key(m), others) is not None

    def plan(
        self,
        item: Any,
        theorems: Sequence[Theorem],
        lines: dict[str, set[int]] | None,
        fingerprint: str | None = None,
    ) -> tuple[dict[str, str], list[GeneratedMutant], int]:
        """``(outcomes known without running, mutants to run, cache hits)`` for a witness
        whose run on the real code had ``fingerprint``."""
        known: dict[str, str] = {}
        todo: list[GeneratedMutant] = []
        hits = 0
        if fingerprint is not None:
            self.fingerprints[item.nodeid] = fingerprint
        for t in theorems:
            waived = self.waived.get(t.id, {})
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
    return len(_interrupt_threads(_codes(code))) if code is not None else 0


def stop_mutant_threads(m: GeneratedMutant, rounds: int = 50, pause: float = 0.02) -> int:
    """After a re-run, whatever its outcome: stop every other thread still running the
    mutant's code, raising :class:`MutantTimeout` into it again (a mutated ``except`` may
    swallow one) until none is left or ``rounds`` pauses pass. Returns how many threads
    it raised into (0 when the re-run left none, the usual case). A thread still holding
    the code after the last round is blocked where no exception reaches it: it stays
    blocked, with nothing pending (:func:`_interrupt_threads`)."""
    code = m.current_code()
    if code is None:
        return 0
    codes = _codes(code)
    hit = 0
    for _ in range(rounds):
        left = _interrupt_threads(codes)
        if not left:
            break
        hit += len(left)
        time.sleep(pause)
    return hit
