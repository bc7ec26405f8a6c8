"""The self-modify guard: does any part of a call's arguments name a protected path?

Every key and every string at any depth is a candidate, and so is every path it names:

* the whole string (or key);
* the file names in a patch's headers (``*** Update File: p``, ``*** Add File: p``,
  ``*** Delete File: p``, ``*** Move to: p``, ``--- a/p``, ``+++ b/p``, ``diff --git``,
  ``rename``/``copy from``/``to``, ``Index: p``), one per line;
* its shell words: the text with quote characters removed (backslashes kept, and again
  removed), split on white space and shell punctuation (``;|&<>()`=,:[]{}``), and, for a
  string of at most :data:`SHLEX_MAX` characters, the words :func:`shlex.split` reads
  (a quoting error there is ignored: the split words were taken already).

Each candidate is normalised (``\\`` to ``/``, then :func:`posixpath.normpath`) and
matched by each glob against its every trailing part (:func:`fak_core.floor.glob_matches`).
The walk is iterative and every step is linear: a glob's literal pieces are looked for in
the text (at C speed) before any candidate is cut from it or matched, splitting is by
compiled character classes, matching is one pass (:mod:`fak_core.globmatch`), and
:mod:`shlex` (quadratic on one long word) only ever sees short strings.

What it does not do: evaluate the shell (variables, globs, brace expansion, ``cd``), or
read a path that is assembled from parts in different strings.
"""

from __future__ import annotations

import contextlib
import posixpath
import re
import shlex
from collections.abc import Iterable, Iterator
from typing import Any

from fak_core.globmatch import Glob, compile_glob

__all__ = ["SHLEX_MAX", "PathGuard", "glob_pattern", "shell_words"]

#: Strings longer than this are split without :mod:`shlex` (which copies a word per character).
SHLEX_MAX = 1024

_QUOTES = str.maketrans("", "", "'\"")
_QUOTES_AND_ESCAPES = str.maketrans("", "", "'\"\\")
_SPLIT = re.compile(r"[\s;|&<>()`=,:\[\]{}]++")
_HEADERS = (
    "*** Update File:",
    "*** Add File:",
    "*** Delete File:",
    "*** Move to:",
    "--- ",
    "+++ ",
    "diff --git ",
    "rename from ",
    "rename to ",
    "copy from ",
    "copy to ",
    "Index: ",
)
# A glob's gate pieces: its literal runs cut at "/" and at the characters the word
# splitter may drop, so a piece found in a word is found in the text the word came from.
_GATE_CUT = re.compile(r"[/'\"\\]")


def glob_pattern(glob: str) -> str:
    """A policy glob as a pattern: one ending in ``/`` covers everything under it."""
    return glob + "*" if glob.endswith("/") else glob


def shell_words(text: str) -> list[str]:
    """The words of ``text`` as a shell might read them (over-approximated, never raising).

    Quote characters are removed (a shell joins quoted pieces to their neighbours), then
    the text is split on white space and shell punctuation, once with backslashes kept
    (a Windows path) and once with them removed (a shell escape); short texts are also
    read by :func:`shlex.split`.
    """
    kept = text.translate(_QUOTES)
    words = [w for w in _SPLIT.split(kept) if w]
    if "\\" in kept:
        words += [w for w in _SPLIT.split(text.translate(_QUOTES_AND_ESCAPES)) if w]
    if len(text) <= SHLEX_MAX and ("'" in text or '"' in text or "\\" in text):
        # unbalanced quotes raise ValueError: the split above took the words already
        with contextlib.suppress(ValueError):
            words += shlex.split(text, posix=True)
    return words


def patch_paths(text: str) -> Iterator[str]:
    """The file names in the headers of a patch (any common format), one per header line."""
    for raw in text.splitlines():
        line = raw.lstrip()
        for marker in _HEADERS:
            if line.startswith(marker):
                name = line[len(marker) :]
                if marker in ("--- ", "+++ "):
                    name = name.split("\t", 1)[0]
                yield name.strip().strip('"')
                break


class _Gated:
    """One protected glob, compiled, with the pieces every text it matches contains."""

    __slots__ = ("glob", "pieces", "prog")

    def __init__(self, glob: str) -> None:
        self.glob = glob
        self.prog: Glob = compile_glob(glob_pattern(glob))
        self.pieces = tuple(p for piece in self.prog.pieces for p in _GATE_CUT.split(piece) if p)

    def could_name(self, text: str) -> bool:
        for piece in self.pieces:  # noqa: SIM110 - a plain loop beats all() here
            if piece not in text:
                return False
        return True

    def matches(self, candidate: str) -> bool:
        p = posixpath.normpath(candidate.replace("\\", "/"))
        return self.prog.run(p, False)[0]


class PathGuard:
    """The protected globs of one policy; :meth:`first_protected` walks arguments."""

    def __init__(self, globs: Iterable[str]) -> None:
        self._globs = tuple(_Gated(g) for g in globs)

    def __bool__(self) -> bool:
        return bool(self._globs)

    def first_protected(self, args: Any, raw: str | bytes | None = None) -> str | None:
        """The first glob that a key or string anywhere in ``args`` names, or None.

        ``raw``, the JSON text ``args`` was parsed from, lets most calls skip the walk:
        without a backslash it holds no escape, so every key and string (and every word
        cut from one) is a substring of it with quotes removed, and a glob none of whose
        pieces occur there cannot be named.
        """
        globs = self._globs
        if raw is not None:
            text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
            if "\\" not in text:
                text = text.translate(_QUOTES)
                globs = tuple(g for g in globs if g.could_name(text))
                if not globs:
                    return None
        stack: list[Any] = [args]
        pop, push = stack.pop, stack.append
        while stack:
            value = pop()
            if type(value) is str:
                if value:
                    hit = self.protected(value, globs)
                    if hit is not None:
                        return hit
            elif type(value) is dict:
                for k, v in value.items():
                    hit = self.protected(k, globs) if k else None
                    if hit is not None:
                        return hit
                    push(v)
            elif type(value) is list:
                stack.extend(value)
        return None

    def protected(self, text: str, globs: tuple[_Gated, ...] | None = None) -> str | None:
        """The first glob that ``text`` names as a whole, in a patch header or as a word."""
        for g in self._globs if globs is None else globs:
            if self._names(g, text):
                return g.glob
        return None

    @staticmethod
    def _names(g: _Gated, text: str) -> bool:
        if g.could_name(text):
            if g.matches(text):
                return True
            if "\n" in text or "\r" in text:
                for name in patch_paths(text):
                    if name and g.could_name(name) and g.matches(name):
                        return True
        elif not (
            ("'" in text or '"' in text or "\\" in text)
            and (
                g.could_name(text.translate(_QUOTES_AND_ESCAPES))
                or g.could_name(text.translate(_QUOTES))
            )
        ):
            return False
        return any(g.could_name(word) and g.matches(word) for word in shell_words(text))
