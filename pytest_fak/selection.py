"""Which theorems a proof run ran, and why the others did not (honest partial runs).

A run is *partial* when something selected among the tests: test paths or node ids on
the command line, ``-k``, ``--fak-theorem``, ``--fak-shard``, ``--lf``/``--sw``, or a
deselected witness (``-m``, ``--deselect``, another plugin); or when the run stopped
before some collected witness ran (``-x``, ``--maxfail``). A theorem *ran* when the run
saw every witness known to bind it; one that did not is NOT RUN: the report keeps its
last verdict with its date, marked carried over, and it does not count towards the exit
status.

The known witnesses of a theorem are those selected, those deselected, those collected
that never ran, and, when the
command line narrowed collection itself (paths, node ids, ``--lf``), those the last
report lists. So:

- a theorem none of whose known witnesses was selected is NOT RUN;
- a theorem only some of whose witnesses ran keeps a REFUTED or ERROR verdict (what ran
  failed), and is otherwise NOT RUN (PROVEN needs every witness, and a mutant one of the
  others kills would look like a survivor);
- a theorem no collected test binds is an orphan: OPEN, and a full run fails on it (a
  real defect), as does ``--fak-theorem`` naming it. A partial run that collected the
  whole tree (``-k``, ``-m``) reports it OPEN without counting it; one that narrowed
  collection cannot tell an orphan from a witness it did not look at, and carries the
  theorem over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fnmatch import fnmatchcase
from typing import Any

import pytest

from pytest_fak.theorems import Theorem, TheoremIndex
from pytest_fak.verdicts import ERROR, REFUTED

__all__ = ["Selection", "marker_ids", "split"]


def marker_ids(item: pytest.Item) -> tuple[list[str], list[str]]:
    """(theorem ids, problems) from every ``fak_theorem`` marker on the item."""
    ids: list[str] = []
    problems: list[str] = []
    for mark in item.iter_markers("fak_theorem"):
        if not mark.args or mark.kwargs:
            problems.append(
                "@pytest.mark.fak_theorem takes theorem ids as positional strings, "
                "e.g. @pytest.mark.fak_theorem('A7.1')"
            )
        for a in mark.args:
            if not isinstance(a, str):
                problems.append(f"theorem id {a!r} is not a string")
            elif a not in ids:
                ids.append(a)
    return ids, problems


class Selection:
    """The selection of one proof run, as the controller sees it."""

    def __init__(
        self,
        config: pytest.Config,
        index: TheoremIndex,
        weight: Callable[[Theorem], int] | None = None,
    ) -> None:
        """``weight``: a theorem's share of the work, for ``--fak-shard`` (default 1)."""
        self.patterns = [p.strip() for p in config.getoption("fak_theorem") if p.strip()]
        ids = [t.id for t in index]
        self.chosen: set[str] | None = None
        if self.patterns:
            unmatched = [p for p in self.patterns if not any(fnmatchcase(i, p) for i in ids)]
            if unmatched and ids:
                known = ", ".join(ids[:20]) + (" …" if len(ids) > 20 else "")
                raise pytest.UsageError(
                    f"--fak-theorem {', '.join(unmatched)}: matches no theorem id "
                    f"(ids are case-sensitive; globs like 'D10.*' work; known: {known})"
                )
            self.chosen = {i for i in ids if any(fnmatchcase(i, p) for p in self.patterns)}
        self.shard = _shard(config.getoption("fak_shard", None))
        if self.shard is not None:
            pool = [t for t in index if self.chosen is None or t.id in self.chosen]
            k, n = self.shard
            self.chosen = split(pool, n, weight or (lambda t: 1))[k - 1]
        self.narrowed: list[str] = []  # what narrowed collection itself
        if config.args_source == pytest.Config.ArgsSource.ARGS and config.args:
            self.narrowed.append("test paths or node ids on the command line")
        if getattr(config.option, "lf", False):
            self.narrowed.append("--lf")
        if getattr(config.option, "stepwise", False):
            self.narrowed.append("--sw")
        self.signals = list(self.narrowed)
        if getattr(config.option, "keyword", ""):
            self.signals.append(f"-k {config.option.keyword!r}")
        if self.patterns:
            self.signals.append("--fak-theorem " + " ".join(self.patterns))
        if self.shard is not None:
            self.signals.append(f"--fak-shard {self.shard[0]}/{self.shard[1]}")
        #: witness node id → the theorem ids it binds, for tests deselected in this run
        self.deselected: dict[str, list[str]] = {}
        #: where collection failed (a witness may be there)
        self.collect_errors: list[str] = []
        #: witness node id → the theorem ids it binds, for every witness collected to run
        self.collected: dict[str, list[str]] = {}
        #: collected witnesses that never ran (``-x``/``--maxfail`` stopped the run first)
        self.unrun: set[str] = set()

    def wants(self, tid: str) -> bool:
        return self.chosen is None or tid in self.chosen

    @property
    def partial(self) -> bool:
        return bool(self.signals or self.deselected)

    def describe(self) -> list[str]:
        """What made this run partial, for the report."""
        out = list(self.signals)
        chosen = self.chosen
        # witnesses of chosen theorems that something else deselected (-m, --deselect)
        other = [n for n, ids in self.deselected.items() if chosen is None or set(ids) & chosen]
        if other:
            out.append(f"{len(other)} witnesses deselected (-m, --deselect, …)")
        return out

    def choose(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Keep only the witnesses of ``--fak-theorem``'s theorems (deselect the rest)."""
        if self.chosen is None:
            return
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            ids, _ = marker_ids(item)
            (keep if any(i in self.chosen for i in ids) else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def record_deselected(self, items: Sequence[pytest.Item]) -> None:
        for item in items:
            ids, _ = marker_ids(item)
            if ids:
                self.deselected[item.nodeid] = ids

    def record_collected(self, items: Sequence[pytest.Item]) -> None:
        for item in items:
            ids, _ = marker_ids(item)
            if ids:
                self.collected[item.nodeid] = ids

    def stopped_early(self, ran: Iterable[str], why: str | None) -> None:
        """Note the collected witnesses not in ``ran`` (the run stopped before them:
        ``why``, pytest's own words): the run is partial, and a theorem one of them binds
        keeps its last verdict unless what ran refuted it."""
        self.unrun = set(self.collected) - set(ran)
        if self.unrun:
            self.signals.append(
                f"{len(self.unrun)} collected witnesses did not run ({why or 'the run stopped'})"
            )

    def merge_worker(self, out: dict[str, Any]) -> None:
        """Fold in what an xdist worker saw (workers collect and deselect; the controller
        does not)."""
        for nodeid, ids in (out.get("fak_deselected") or {}).items():
            self.deselected[nodeid] = list(ids)
        for nodeid, ids in (out.get("fak_collected") or {}).items():
            self.collected[nodeid] = list(ids)
        for where in out.get("fak_collect_errors") or []:
            if where not in self.collect_errors:
                self.collect_errors.append(where)

    def why_not_run(
        self,
        t: Theorem,
        verdict: str,
        ran: Iterable[str],
        previous: dict[str, Any] | None,
    ) -> tuple[str, bool] | None:
        """Why theorem ``t`` did not run, and whether its last verdict is carried over
        (``None``: it ran, and its fresh verdict stands and counts).

        ``ran``: the node ids of its witnesses that ran; ``previous``: its record in the
        last report. An orphan seen in a partial run is not carried over (its last verdict
        is no longer backed by any test): it is reported OPEN, but only a full run, or
        ``--fak-theorem`` naming it, counts it towards the exit status."""
        if t.scoped_out is not None:
            return None
        if not self.wants(t.id):
            if self.shard is not None:
                return f"in another shard than {self.shard[0]}/{self.shard[1]}", True
            return "not selected by --fak-theorem", True
        sel = set(ran)
        known = sel | {n for n, ids in self.deselected.items() if t.id in ids}
        unrun = {n for n in self.unrun if t.id in self.collected.get(n, ())}
        known |= unrun
        if self.narrowed and previous:
            known |= {w["nodeid"] for w in previous.get("witnesses", []) if "nodeid" in w}
        if not sel:
            if unrun:
                return f"none of its {len(known)} witnesses ran (the run stopped first)", True
            if known:
                return f"none of its {len(known)} witnesses was selected", True
            if self.narrowed:
                why = "no witness of it was collected (" + ", ".join(self.narrowed) + ")"
                return why, True
            if self.partial and self.chosen is None:
                return "no collected test binds it (an orphan; a full run fails on it)", False
            return None  # the whole tree was collected and nothing binds it: an orphan
        missing = sorted(known - sel)
        if missing and verdict not in (REFUTED, ERROR):
            first = ", ".join(missing[:3]) + (" …" if len(missing) > 3 else "")
            why = (
                f"only {len(sel)} of its {len(known)} witnesses ran (not {first}); its "
                f"verdict needs all of them: run pytest --fak-theorems --fak-theorem '{t.id}'"
            )
            return why, True
        return None


def _shard(raw: object) -> tuple[int, int] | None:
    if raw is None or raw == "":
        return None
    k, _, n = str(raw).partition("/")
    try:
        shard = int(k), int(n)
    except ValueError:
        shard = None
    if shard is None or not 1 <= shard[0] <= shard[1]:
        raise pytest.UsageError(
            f"--fak-shard {raw}: write K/N with 1 <= K <= N, e.g. --fak-shard 2/4"
        )
    return shard


def split(theorems: Sequence[Theorem], n: int, weight: Callable[[Theorem], int]) -> list[set[str]]:
    """The theorem ids of each of ``n`` shards: heaviest first, each to the lightest shard
    so far (ties by id and shard number), so every process computes the same split."""
    shards: list[set[str]] = [set() for _ in range(n)]
    load = [0] * n
    for t in sorted(theorems, key=lambda t: (-weight(t), t.id)):
        i = min(range(n), key=lambda j: (load[j], j))
        shards[i].add(t.id)
        load[i] += max(1, weight(t))
    return shards
