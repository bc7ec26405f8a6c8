"""Waivers of generated mutants: a stale waiver's reason with the ids to copy, and the
theorems a waiver's reason hands its mutant to.

A waiver is written in a theorem document (**EQUIVALENT-MUTANTS.**) or in the code
(``# pragma: fak-equivalent``, :mod:`pytest_fak.generated`). One whose reason names
another theorem of the run hands its mutant to that theorem's claim: it is refused unless
that theorem anchors the mutated function, and it counts only when that theorem killed or
waived the mutant itself in the same run (:func:`pytest_fak.verdicts.decide_all`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_fak.generated import GeneratedMutant
    from pytest_fak.theorems import Theorem, Waiver

__all__ = ["named_theorems", "stale_reason"]

#: how many current mutants a stale waiver's reason offers to copy
_OFFERED = 3


def named_theorems(reason: str, ids: Iterable[str], own: str) -> list[str]:
    """The theorem ids of ``ids`` other than ``own`` that ``reason`` names, in its order
    (``D10`` is not named by ``D10.7``, nor ``C4.1`` by ``C4.10``)."""
    others = sorted((i for i in ids if i != own), key=len, reverse=True)
    if not others:
        return []
    pattern = re.compile(
        r"(?<![\w.])(" + "|".join(map(re.escape, others)) + r")(?![\w]|[.\-][A-Za-z0-9])"
    )
    found: list[str] = []
    for m in pattern.finditer(reason):
        if m.group(1) not in found:
            found.append(m.group(1))
    return found


def _change(m: GeneratedMutant) -> str:
    """The first line the mutant removes and the first it adds, stripped."""
    body = m.diff.splitlines()[2:]
    old = next((ln[1:].strip() for ln in body if ln.startswith("-")), "")
    new = next((ln[1:].strip() for ln in body if ln.startswith("+")), "")
    return f"{old} → {new}"


def stale_reason(
    t: Theorem, w: Waiver, mutants: Sequence[GeneratedMutant], waived: Collection[str]
) -> str:
    """Why the waiver ``w`` of ``t``, which names none of ``mutants`` (``t``'s), makes ``t``
    ERROR, offering the current ids of the same function and operator that no waiver of
    ``t`` covers: the same change first (its occurrence moved), then by likeness of the
    change to the waiver's reason."""
    symbol, _, rest = w.mutant_id.partition("/")
    operator = rest.split("/", 1)[0]
    base = rest.split("/")[-1].split("#")[0]
    where = f"{Path(t.path).name}:{w.line}"
    head = (
        f"the waiver of {w.mutant_id} ({where}) names a mutant that no longer exists (the "
        "code it mutated changed, or the id is mistyped)"
    )
    if symbol not in {a.symbol for a in t.anchors}:
        return f"{head}: {symbol} is not an anchor of {t.id}; remove the waiver"
    same = [m for m in mutants if m.symbol == symbol and m.operator == operator]
    free = [m for m in same if m.id not in waived]
    if not free:
        left = "no other" if same else "no"
        return f"{head}: {left} {operator} mutant of {symbol} is left to waive; remove the waiver"

    def rank(m: GeneratedMutant) -> tuple[bool, float]:
        exact = m.id.split("/")[-1].split("#")[0] == base
        return (not exact, -difflib.SequenceMatcher(None, w.reason, _change(m)).ratio())

    offered = sorted(free, key=rank)[:_OFFERED]
    listed = "; ".join(f"`{m.id}` (line {m.line}: {_change(m)})" for m in offered)
    more = f" (and {len(free) - len(offered)} more)" if len(free) > _OFFERED else ""
    return (
        f"{head}: if the mutant it meant is one of these and the reason still holds for it, "
        f"copy its current id: {listed}{more}; else remove the waiver"
    )
