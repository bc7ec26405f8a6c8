"""A linear-time glob matcher with exactly the semantics of :func:`fnmatch.fnmatchcase`.

A glob is compiled once into a list of atoms (``*``, ``?``, a bracket class or a literal
character, parsed as :func:`fnmatch.translate` parses them; a class's membership is
decided by the regular expression ``fnmatch`` itself builds for it). Matching simulates
the glob's nondeterministic automaton bit-parallel (shift-and): one pass over the text,
one step per character, every live state carried in one integer. Consecutive ``*`` are
one ``*``, and a ``*`` matches any run of characters, ``/`` included, as ``fnmatch`` does.

``run(text, starts)`` matches the glob against every suffix of ``text`` that begins at a
position in ``starts`` (0 only for an anchored match; 0 and every position after a ``/``
for a match of any trailing part of a path) in the same single pass, so asking about all
suffixes costs what asking about one does. The step counter it returns is the number of
characters consumed: at most ``len(text)``, whatever the glob or the text (each step is a
handful of integer operations on ``len(glob) + 1`` bits). The two commonest shapes, a
literal and a literal followed by one ``*``, are answered by a substring test instead
(counted as ``len(text)`` steps), which means the same and runs at C speed.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

__all__ = ["Glob", "compile_glob"]

_STAR = "*"
_MEMO_LIMIT = 4096


def _atoms(glob: str) -> list[str | Callable[[str], bool]]:
    """The glob's atoms: ``"*"``, a literal character, or a one-character predicate."""
    atoms: list[str | Callable[[str], bool]] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        i += 1
        if c == "*":
            if not atoms or atoms[-1] != _STAR:
                atoms.append(_STAR)
        elif c == "?":
            atoms.append(_any)
        elif c == "[":
            # the bracket's extent, exactly as fnmatch.translate finds it
            j = i
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:
                atoms.append("[")  # an unclosed bracket is a literal
            else:
                atoms.append(_member(re.compile(fnmatch.translate(glob[i - 1 : j + 1]))))
                i = j + 1
        else:
            atoms.append(c)
    return atoms


def _any(ch: str) -> bool:
    return True


def _member(cls: re.Pattern[str]) -> Callable[[str], bool]:
    """A bracket class as a predicate (the class is the regular expression fnmatch builds)."""
    match = cls.match
    return lambda ch: match(ch) is not None


class Glob:
    """One compiled glob. ``match`` answers in one pass over the text."""

    __slots__ = (
        "_atoms",
        "_final",
        "_head",
        "_literal",
        "_memo",
        "_prefix",
        "_stars",
        "_tail",
        "glob",
        "pieces",
    )

    def __init__(self, glob: str) -> None:
        self.glob = glob
        atoms = _atoms(glob)
        self._atoms = atoms
        self._final = 1 << len(atoms)
        self._stars = sum(1 << j for j, a in enumerate(atoms) if a == _STAR)
        self._memo: dict[str, int] = {}
        # The literal runs of the glob, cut at "/": any text the glob matches contains each.
        runs: list[str] = []
        cur: list[str] = []
        for a in atoms:
            if isinstance(a, str) and a != _STAR:
                cur.append(a)
            else:
                runs.append("".join(cur))
                cur = []
        runs.append("".join(cur))
        self.pieces = tuple(p for r in runs for p in r.split("/") if p)
        # The common shapes, answered by a substring test at C speed with the same meaning:
        # a literal (``fak-policy.json``) and a literal followed by one star (``fak_core/*``).
        plain = all(isinstance(a, str) and a != _STAR for a in atoms)
        self._literal = "".join(atoms) if plain else None  # type: ignore[arg-type]
        head = atoms[:-1]
        prefix = (
            atoms and atoms[-1] == _STAR and all(isinstance(a, str) and a != _STAR for a in head)
        )
        self._prefix = "".join(head) if prefix else None  # type: ignore[arg-type]
        # The literal runs the glob starts and ends with: a text that does not start (at a
        # part) or end with them cannot match, which a substring test says at C speed.
        self._head = runs[0]
        self._tail = runs[-1] if len(runs) > 1 else ""

    @property
    def simple(self) -> bool:
        """Whether the glob is a literal, or a literal followed by one ``*``."""
        return self._literal is not None or self._prefix is not None

    def _mask(self, ch: str) -> int:
        """The states whose (non-star) atom accepts ``ch``, memoised per character."""
        mask = 0
        for j, a in enumerate(self._atoms):
            if a == _STAR:
                continue
            if a == ch if isinstance(a, str) else a(ch):
                mask |= 1 << j
        memo = self._memo
        if len(memo) >= _MEMO_LIMIT:
            memo.clear()
        memo[ch] = mask
        return mask

    def could_match(self, text: str) -> bool:
        """A necessary condition, checked at C speed: every literal piece occurs in ``text``."""
        for piece in self.pieces:  # noqa: SIM110 - a plain loop beats all() here
            if piece not in text:
                return False
        return True

    def run(self, text: str, anchored: bool) -> tuple[bool, int]:
        """(whether the glob matches ``text`` or, unless ``anchored``, any suffix of it that
        starts just after a ``/``; the number of steps taken)."""
        prefix = self._prefix
        if prefix is not None:  # some part starts with the prefix
            hit = text.startswith(prefix) or (not anchored and "/" + prefix in text)
            return hit, len(text)
        literal = self._literal
        if literal is not None:  # some part is the literal
            hit = text == literal or (not anchored and text.endswith("/" + literal))
            return hit, len(text)
        tail = self._tail
        if tail and not text.endswith(tail):
            return False, len(text)
        h = self._head
        if h and not (text.startswith(h) or (not anchored and "/" + h in text)):
            return False, len(text)
        stars = self._stars
        final = self._final
        memo = self._memo
        cur = 1 | ((1 & stars) << 1)
        steps = 0
        for ch in text:
            steps += 1
            mask = memo.get(ch)
            if mask is None:
                mask = self._mask(ch)
            cur = ((cur & mask) << 1) | (cur & stars)
            if ch == "/" and not anchored:
                cur |= 1
            cur |= (cur & stars) << 1
            if not cur and anchored:
                break
        return bool(cur & final), steps

    def match(self, text: str, anchored: bool = True) -> bool:
        return self.run(text, anchored)[0]


_compiled: dict[str, Glob] = {}


def compile_glob(glob: str) -> Glob:
    """The compiled form of ``glob`` (cached; globs come from policies, so they are few)."""
    g = _compiled.get(glob)
    if g is None:
        if len(_compiled) >= _MEMO_LIMIT:
            _compiled.clear()
        g = _compiled[glob] = Glob(glob)
    return g
