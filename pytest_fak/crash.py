"""Guards of a proof run against mutants that blow up the process.

:func:`memory_limit`: while a witness re-runs under a mutant, the process's address space
is capped (``RLIMIT_AS`` soft limit = its current size + a budget, ``--fak-mutant-memory``),
so a mutant that turns a bounded loop into an unbounded allocation meets ``MemoryError``
instead of taking the machine down. The old limit is restored when the re-run ends, also
on error. Where there is no ``RLIMIT_AS`` or no ``/proc/self/statm`` to read the current
size (anything but Linux), nothing is limited and :func:`memory_limit_unsupported` says why.

:class:`FlightRecorder`: under xdist, before each mutant it applies, a worker overwrites a
one-line marker file naming the witness, the mutant in flight and what the witness showed
on the real code (its theorems, examples, anchors). When the worker dies under the mutant
(a segfault, an abort), the controller reads the marker (:func:`read_flight`) and can say
which mutant crashed it, instead of losing the witness's evidence with the worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from typing import Any

from pytest_fak import verdicts

try:
    import resource
except ImportError:  # pragma: no cover - not on Windows
    resource = None  # type: ignore[assignment]

__all__ = [
    "read_deps",
    "DEFAULT_MUTANT_MEMORY",
    "FlightRecorder",
    "is_memory_error",
    "memory_limit",
    "memory_limit_unsupported",
    "parse_size",
    "read_flight",
    "record_crash",
]

DEFAULT_MUTANT_MEMORY = "2G"
_STATM = "/proc/self/statm"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int | None:
    """Bytes of ``"2G"``, ``"512M"``, ``"1048576"`` (binary units, an optional ``iB``/``B``);
    ``None`` for ``"off"``/``"none"``/``"0"`` (no limit). Raises ValueError otherwise."""
    raw = text.strip().upper()
    if raw in ("OFF", "NONE", "0"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(I?B)?", raw)
    if m is None or (m.group(3) and not m.group(2) and m.group(3) != "B"):
        raise ValueError(f"{text!r}: expected a size like 2G, 512M or 'off'")
    value = int(float(m.group(1)) * _UNITS[m.group(2)])
    if value <= 0:
        raise ValueError(f"{text!r}: the budget must be positive (or 'off')")
    return value


def memory_limit_unsupported() -> str | None:
    """None where :func:`memory_limit` is enforced, else why it is not."""
    if resource is None or not hasattr(resource, "RLIMIT_AS"):
        return "no RLIMIT_AS on this platform"
    if not os.path.exists(_STATM):
        return f"no {_STATM} to read the process's address space from"
    return None


def _address_space() -> int:
    with open(_STATM, "rb") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def memory_limit(budget: int | None) -> Iterator[None]:
    """Cap the address space at its current size + ``budget`` bytes inside the block
    (no-op for ``None`` or where unsupported; a tighter limit already set stays)."""
    if budget is None or memory_limit_unsupported() is not None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space() + budget
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY and soft <= cap:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def is_memory_error(exc: BaseException) -> bool:
    """Whether ``exc`` is, wraps or groups a ``MemoryError``."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, MemoryError):
            return True
        todo += [x for x in (e.__cause__, e.__context__) if x is not None]
        if isinstance(e, BaseExceptionGroup):
            todo += list(e.exceptions)
    return False


class FlightRecorder:
    """A worker's "mutant in flight" marker: one JSON line, overwritten in place.

    Written with ``os.pwrite`` on a file kept open, so it is in the kernel before the
    mutant runs and survives the process dying; the record is newline-terminated, so a
    crash between the write and the truncation still leaves the new record first."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)

    def record(self, entry: dict[str, Any]) -> None:
        if self._fd is None:
            return
        data = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
        os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, len(data))

    def clear(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)

    def record_deps(self, entry: dict[str, Any]) -> None:
        """Keep the fingerprint of the witness whose mutants run next (its node id, digest
        and dependency keys) beside the marker, so a crash under one of them can still
        be cached against what the witness's run depended on."""
        tmp = f"{self.path}.deps.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(entry, fh, separators=(",", ":"))
        os.replace(tmp, f"{self.path}.deps")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_flight(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The record a crashed worker left in its marker file (None: none, or unreadable)."""
    try:
        with open(path, encoding="utf-8") as fh:
            line = fh.readline()
    except OSError:
        return None
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def read_deps(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The fingerprint :meth:`FlightRecorder.record_deps` left for the marker at ``path``."""
    try:
        with open(f"{os.fspath(path)}.deps", encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def record_crash(ev: verdicts.WitnessEvidence, worker: str, flight: dict[str, Any] | None) -> None:
    """Fold a worker's death while running witness ``ev`` into its evidence.

    ``flight`` is the worker's marker for this witness (None: no marker names it). Under a
    mutant, the witness had passed on the real code in that process (mutants run only
    after it did): it stays passed, with that run's examples and anchors, and the mutant
    is ``crashed`` (killed); its other mutant outcomes of the run are lost. Outside any
    mutant (its own run, its fixtures, a control run) the crash is not attributable to
    the code: the witness is an ``error`` of kind ``crashed``."""
    mutant = flight.get("mutant") if flight else None
    kind = flight.get("kind") if flight else None
    ev.crash = {"worker": worker, "mutant": mutant, "kind": kind}
    if flight is not None and mutant is not None:
        ev.outcome = "passed"
        ev.examples = flight.get("examples")
        ev.anchors = dict(flight.get("anchors") or {})
        ev.witness_fp = flight.get("witness_fp")
        ev.mutants, ev.generated = {}, {}
        (ev.mutants if kind == "declared" else ev.generated)[mutant] = verdicts.CRASHED
        return
    ev.outcome = "error"
    ev.error_kind = "crashed"
    where = "its control re-run" if kind == "control" else "its own run or its fixtures"
    ev.failure = {"message": f"worker {worker} crashed while running {where}"}
