"""The self-modify guard: does any part of a call's arguments name a protected path?

Every key and every string at any depth is a candidate, and so is every path it names:

* the whole string (or key);
* the file names in a patch's headers (``*** Update File: p``, ``*** Add File: p``,
  ``*** Delete File: p``, ``*** Move to: p``, ``--- a/p``, ``+++ b/p``, ``diff --git``,
  ``rename``/``copy from``/``to``, ``Index: p``), one per line, in a text of one line too;
* its shell words: the text with quote characters removed (backslashes kept, and again
  removed), split on white space and shell punctuation (``;|&<>()`=,:[]{}``); and, for a
  glob other than a plain name or directory (``*.pem``, or one holding such a character),
  the words :func:`shlex.split` would read (:func:`shlex_words`, which never raises).

Each candidate is normalised (``\\`` to ``/``, then :func:`posixpath.normpath`) and
matched by each glob against its every trailing part (:func:`fak_core.floor.glob_matches`).
The walk is iterative and every step is linear: a glob's literal pieces are looked for in
the text (at C speed) before any candidate is cut from it or matched, splitting is by
compiled character classes, matching is one pass (:mod:`fak_core.globmatch`), and shell
words are read by possessive patterns, not by :mod:`shlex` (quadratic on one long word).

What it does not do: evaluate the shell (variables, globs, brace expansion, ``cd``), or
read a path that is assembled from parts in different strings.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator

from fak_core.globmatch import Glob, compile_glob

__all__ = ["PathGuard", "glob_pattern", "patch_paths", "shell_words", "shlex_words"]


def _unquoted(text: str) -> str:
    """``text`` without quote characters (str.replace: str.translate is ten times slower)."""
    return text.replace("'", "").replace('"', "")


def _unescaped(text: str) -> str:
    """``text`` without quote characters and backslashes."""
    return _unquoted(text).replace("\\", "")


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
    (a Windows path) and once with them removed (a shell escape). Every word
    :func:`shlex.split` would read is one of these or holds one, except a word in which
    quoting keeps a separator (``'My Docs/x'``): see :func:`shlex_words`.
    """
    kept = _unquoted(text)
    words = [w for w in _SPLIT.split(kept) if w]
    if "\\" in kept:
        words += [w for w in _SPLIT.split(kept.replace("\\", "")) if w]
    return words


# One POSIX shell word, as shlex.split reads it (white space ' \t\r\n' separates; single
# quotes keep everything; in double quotes a backslash escapes only '"' and '\\'; outside,
# a backslash escapes any character). An unclosed quote runs to the end of the text and a
# final backslash stands for itself, so no alternative ever fails after reading: every
# character is read once (and every repeat is possessive).
_WORD = re.compile(
    r"""(?:[^ \t\r\n'"\\]++|'[^']*+(?:'|\Z)|"(?:[^"\\]++|\\.)*+(?:"|\Z)|\\(?:.|\Z))++""",
    re.DOTALL,
)
_SEGMENT = re.compile(
    r"""'([^']*+)(?:'|\Z)|"((?:[^"\\]++|\\.)*+)(?:"|\Z)|\\(.|\Z)|([^'"\\]++)""", re.DOTALL
)
_DQ_ESCAPE = re.compile(r'\\(["\\])')


def _unquote(segment: re.Match[str]) -> str:
    single, double, escaped, bare = segment.groups()
    if double is not None:
        return _DQ_ESCAPE.sub(r"\1", double)
    return single if single is not None else escaped if escaped is not None else bare


def shlex_words(text: str) -> list[str]:
    """The words :func:`shlex.split` reads from ``text`` (``posix=True``), read in one pass
    by compiled patterns: the same words wherever :mod:`shlex` succeeds (a test compares
    them). Where it would raise, an unclosed quote runs to the end of the text and a final
    backslash is kept. :mod:`shlex` itself is not used: it reads a character at a time in
    Python and copies its word once per character (quadratic on one long word)."""
    return [
        "".join(_unquote(seg) for seg in _SEGMENT.finditer(word.group()))
        for word in _WORD.finditer(text)
    ]


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


class Gated:
    """One protected glob, compiled, with the pieces every text it matches contains."""

    __slots__ = ("glob", "pieces", "prog", "spaced")

    def __init__(self, glob: str) -> None:
        self.glob = glob
        self.prog: Glob = compile_glob(glob_pattern(glob))
        self.pieces = tuple(p for piece in self.prog.pieces for p in _GATE_CUT.split(piece) if p)
        # The split words find whatever shlex's words would for a literal or literal-star
        # glob without a character the splitter cuts on (its match lies inside one split
        # word); any other glob may need a quoted word whole (``'a b/x.py'``, ``*.py``).
        self.spaced = not self.prog.simple or _SPLIT.search(glob) is not None

    def could_name(self, text: str) -> bool:
        for piece in self.pieces:  # noqa: SIM110 - a plain loop beats all() here
            if piece not in text:
                return False
        return True

    def matches(self, candidate: str) -> bool:
        p = posixpath.normpath(candidate.replace("\\", "/"))
        return self.prog.run(p, False)[0]

    def any_match(self, candidates: list[str]) -> bool:
        return any(self.could_name(c) and self.matches(c) for c in candidates)


class PathGuard:
    """The protected globs of one policy: :meth:`candidates` narrows them by a call's raw
    text, :meth:`protected` reads one key or string (the floor's walk,
    :class:`fak_core.argscan.ArgumentScan`, asks it of every key and string)."""

    __slots__ = ("_globs",)

    def __init__(self, globs: Iterable[str]) -> None:
        self._globs = tuple(Gated(g) for g in globs)

    def __bool__(self) -> bool:
        return bool(self._globs)

    def candidates(self, raw: str | bytes | None) -> tuple[Gated, ...]:
        """The globs that arguments parsed from the JSON text ``raw`` may name (all of
        them when ``raw`` is None).

        Without a backslash the text holds no escape, so every key and string (and every
        word cut from one) is a substring of it with quotes removed, and a glob none of
        whose pieces occur there cannot be named: most calls need no walk at all.
        """
        globs = self._globs
        if raw is not None and globs:
            text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
            if "\\" not in text:
                text = _unquoted(text)
                globs = tuple(g for g in globs if g.could_name(text))
        return globs

    def protected(self, text: str, globs: tuple[Gated, ...] | None = None) -> str | None:
        """The first glob that ``text`` names as a whole, in a patch header or as a word.

        Each reading of ``text`` (patch names, words, unquoted variants) is made at most
        once, and only for a glob whose pieces occur in the text it is cut from."""
        quoted = "'" in text or '"' in text or "\\" in text
        bare: str | None = None  # the text without quotes and backslashes
        names: list[str] | None = None
        words: list[str] | None = None
        shlexed: list[str] | None = None
        for g in self._globs if globs is None else globs:
            if g.could_name(text):
                if g.matches(text):
                    return g.glob
                if names is None:  # a header is a line: a text of one line may be one
                    names = [n for n in patch_paths(text) if n]
                if g.any_match(names):
                    return g.glob
            elif not quoted:
                continue
            else:
                # removing quotes and backslashes only joins text: a piece found after
                # removing quotes is found after removing backslashes too
                if bare is None:
                    bare = _unescaped(text)
                if not g.could_name(bare):
                    continue
            if words is None:
                words = shell_words(text)
            if g.any_match(words):
                return g.glob
            if g.spaced:  # the shell's own reading of the words (a separator in the glob)
                if shlexed is None:
                    shlexed = shlex_words(text)
                if g.any_match(shlexed):
                    return g.glob
        return None
