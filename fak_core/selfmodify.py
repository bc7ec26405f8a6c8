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

__all__ = [
    "PathGuard",
    "ansi_c",
    "command_words",
    "glob_pattern",
    "patch_paths",
    "posix_words",
    "shell_words",
    "shlex_words",
    "windows_words",
]


def _unquoted(text: str) -> str:
    """``text`` without quote characters (str.replace: str.translate is ten times slower)."""
    return text.replace("'", "").replace('"', "")


def _unescaped(text: str) -> str:
    """``text`` without quote characters, line continuations and backslashes."""
    return _unquoted(text).replace("\\\n", "").replace("\\", "")


_SPLIT = re.compile(r"[\s;|&<>()`=,:\[\]{}$]++")
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
# A text in which the shell's words differ from the split of the text without quotes.
_SHELLISH = re.compile(r"""['"\\$]""")


def glob_pattern(glob: str) -> str:
    """A policy glob as a pattern: one ending in ``/`` covers everything under it."""
    return glob + "*" if glob.endswith("/") else glob


def shell_words(text: str) -> list[str]:
    """The words of ``text`` as a shell might read them (over-approximated, never raising).

    Quote characters are removed (a shell joins quoted pieces to their neighbours), then
    the text is split on white space and shell punctuation with backslashes kept (a
    Windows path); when the text holds a quote, a backslash or a ``$``, the words the
    POSIX shell reads, one command deep (:func:`posix_words`: escapes, ``$'...'``, line
    continuations) are split the same way. A glob that is a plain name or directory (no
    wildcard other than a final ``*``, no character the splitter cuts on) matches inside
    one of these words wherever it matches a word the shell reads.
    """
    words = [w for w in _SPLIT.split(_unquoted(text)) if w]
    if _SHELLISH.search(text) is not None:
        words += [w for w in _SPLIT.split(" ".join(posix_words(text))) if w]
    return words


# One word of a command string as a POSIX shell tokenises it (XCU 2.3, 2.2): blanks
# (space, tab, CR, LF) and the unquoted operator characters ``;&|<>()`` and the backquote
# end a word; single quotes keep everything; ``$'...'`` (ANSI-C quoting) reads backslash
# escapes; in double quotes (``"..."`` or ``$"..."``) a backslash escapes ``$ ` " \`` and
# a newline; outside, a backslash escapes any character, and a backslash-newline is
# removed. An unclosed quote runs to the end of the text and a final backslash stands for
# itself, so no alternative ever fails after reading: every character is read once (and
# every repeat is possessive).
_WORD = re.compile(
    r"""(?:[^ \t\r\n'"\\;&|<>()`$]++|\$(?!['"])|\$'(?:[^'\\]++|\\(?:.|\Z))*+(?:'|\Z)"""
    r"""|'[^']*+(?:'|\Z)|\$?"(?:[^"\\]++|\\(?:.|\Z))*+(?:"|\Z)|\\(?:.|\Z))++""",
    re.DOTALL,
)
_SEGMENT = re.compile(
    r"""\$'((?:[^'\\]++|\\(?:.|\Z))*+)(?:'|\Z)|'([^']*+)(?:'|\Z)"""
    r"""|\$?"((?:[^"\\]++|\\(?:.|\Z))*+)(?:"|\Z)|\\(.|\Z)|((?:[^'"\\$]++|\$(?!['"]))++)""",
    re.DOTALL,
)
_DQ_ESCAPE = re.compile(r'\\([$`"\\\n])')
# ANSI-C escapes as bash reads them (ksh, zsh and POSIX.1-2024 agree on the common ones):
# the named ones, hex, octal, Unicode, ^X (``\c\\`` is one control character).
_ANSI = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c\\\\|c.|.|\Z)",
    re.DOTALL,
)
_ANSI_NAMED = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "e": "\x1b",
    "E": "\x1b",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_OCTAL = frozenset("01234567")
# A word as a Windows shell reads it (cmd.exe, PowerShell): quotes group, a backslash is a
# path separator, not an escape; the operators and the backquote end it, as in POSIX.
_WIN_WORD = re.compile(r"""(?:[^ \t\r\n'";&|<>()`]++|'[^']*+(?:'|\Z)|"[^"]*+(?:"|\Z))++""")
# The characters that make a word worth reading again as a command (``sh -c '...'``).
_NESTED = re.compile(r"""[ \t\r\n'"\\;&|<>()`]""")


def _utf8(n: int) -> bytes:
    """``n`` as bash writes a ``\\u`` or ``\\U`` escape (in a UTF-8 locale): UTF-8 in its
    original form (RFC 2279, up to six bytes, surrogates included), nothing from 2**31."""
    if n < 0x80:
        return bytes((n,))
    if n >> 31:
        return b""
    size = 2
    while n >> (5 * size + 1):
        size += 1
    tail = [0x80 | (n >> 6 * i) & 0x3F for i in reversed(range(size - 1))]
    return bytes(((0xFF00 >> size) & 0xFF | n >> 6 * (size - 1), *tail))


def _ansi_bytes(e: str) -> bytes:
    """The bytes bash writes for the escape ``\\e`` of an ANSI-C string."""
    head = e[:1]
    if head in ("x", "u", "U") and len(e) > 1:
        n = int(e[1:], 16)
        return bytes((n,)) if head == "x" else _utf8(n)
    if head in _OCTAL:
        return bytes((int(e, 8) & 0xFF,))  # bash keeps the low byte: \457 is "/"
    if head == "c" and len(e) > 1:
        if e[1] == "?":
            return b"\x7f"
        first = e[1].encode("utf-8", "surrogatepass")  # bash reads one byte
        return bytes((first[0] & 31,)) + first[1:]
    # an unknown escape (and \x, \u, \c without their argument) keeps its backslash
    named = _ANSI_NAMED.get(e)
    return ("\\" + e if named is None else named).encode("utf-8", "surrogatepass")


def ansi_c(body: str) -> str:
    """The text of the ANSI-C quoted string ``$'body'`` as bash reads it in a UTF-8 locale:
    bytes, which an escaped NUL ends (bash keeps a C string), read as UTF-8 (a byte that
    is no part of a character as a surrogate escape, as Python reads a file name)."""
    out = bytearray()
    pos = 0
    for m in _ANSI.finditer(body):
        out += body[pos : m.start()].encode("utf-8", "surrogatepass")
        out += _ansi_bytes(m.group(1))
        pos = m.end()
    out += body[pos:].encode("utf-8", "surrogatepass")
    return bytes(out).partition(b"\0")[0].decode("utf-8", "surrogateescape")


def _unquote(segment: re.Match[str]) -> str:
    ansi, single, double, escaped, bare = segment.groups()
    if ansi is not None:
        return ansi_c(ansi)
    if double is not None:
        return _DQ_ESCAPE.sub(_dq_char, double)
    if escaped is not None:
        return "" if escaped == "\n" else escaped or "\\"
    return single if single is not None else bare


def _dq_char(m: re.Match[str]) -> str:
    c = m.group(1)
    return "" if c == "\n" else c


def shlex_words(text: str) -> list[str]:
    """The words of the command string ``text`` as a POSIX shell reads them, in one pass
    of compiled patterns (operators dropped). Where :mod:`shlex` (``posix=True``,
    ``punctuation_chars=True``, ``whitespace_split=True``, no comments) succeeds on a text
    without ``$``, a backquote or a backslash before a newline, these are its words
    without its operator tokens (a test compares them); beyond it, ``$'...'``, ``$"..."``
    and backslash-newline are read as the shell reads them. Nothing raises: an unclosed
    quote runs to the end of the text, a final backslash is kept. :mod:`shlex` itself is
    not used: it reads a character at a time in Python and copies its word once per
    character (quadratic on one long word)."""
    return [
        "".join(_unquote(seg) for seg in _SEGMENT.finditer(word.group()))
        for word in _WORD.finditer(text)
    ]


def windows_words(text: str) -> list[str]:
    """The words of ``text`` as a Windows shell reads them: quote characters group and are
    removed, backslashes are kept."""
    return [_unquoted(w.group()) for w in _WIN_WORD.finditer(text)]


def posix_words(text: str) -> list[str]:
    """The POSIX words of ``text`` and of each of them that is itself a command string
    (one level: ``sh -c 'echo > x'``): at most twice the text."""
    words = shlex_words(text)
    words += [w for word in words if _NESTED.search(word) for w in shlex_words(word)]
    return words


def command_words(text: str) -> list[str]:
    """Every word a command string names: its POSIX words, the POSIX words of each of those
    that is itself a command (one level: ``sh -c 'echo > x'``), and its Windows words. At
    most three readings, each no longer than the text."""
    return posix_words(text) + windows_words(text)


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

    __slots__ = ("cut", "glob", "pieces", "prog", "seps", "spaced")

    def __init__(self, glob: str) -> None:
        self.glob = glob
        self.prog: Glob = compile_glob(glob_pattern(glob))
        self.pieces = tuple(p for piece in self.prog.pieces for p in _GATE_CUT.split(piece) if p)
        # The split words find whatever the shell's words would for a literal or
        # literal-star glob without a character the splitter cuts on (its match lies inside
        # one split word); any other glob needs the shell's words (``'a b/x.py'``, ``*.py``).
        self.spaced = not self.prog.simple or _SPLIT.search(glob) is not None
        # An option's value or an assignment (``--out=p``, ``of=p``, ``C:p``, ``-op``) is a
        # path of its own: '=' and ':' also end a part, and so does a leading ``-x``. Only
        # where that cannot undo a match: a glob without the character or a class (whose
        # match of it '/' would not replace; '?' and '*' match '/' as they match '='), and,
        # for the option, one that starts with a literal other than '-' (which no match can
        # start with the option).
        plain = "[" not in glob
        self.seps = tuple(c for c in "=:" if plain and c not in glob)
        self.cut = glob[:1] not in ("", "-", "*", "?", "[", "\\")

    def could_name(self, text: str) -> bool:
        for piece in self.pieces:  # noqa: SIM110 - a plain loop beats all() here
            if piece not in text:
                return False
        return True

    def matches(self, candidate: str) -> bool:
        p = posixpath.normpath(candidate.replace("\\", "/"))
        # after normalising, so that no '..' can cancel a part a separator made
        for c in self.seps:
            p = p.replace(c, "/")
        if self.cut and p[:1] == "-" and p[1:2].isalpha():
            p = "-/" + p[2:]  # (no longer: a match is still read in one pass of the text)
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

        Each reading of ``text`` (patch names, split words, the shell's words) is made at
        most once, and only for a glob whose pieces occur in the text it is cut from."""
        quoted = "'" in text or '"' in text or "\\" in text
        ansi = "$'" in text  # ANSI-C escapes can spell any character
        bare: str | None = None  # the text without quotes and backslashes
        names: list[str] | None = None
        words: list[str] | None = None
        commands: list[str] | None = None
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
            elif not ansi:
                # removing quotes and backslashes only joins text: a piece found after
                # removing quotes is found after removing backslashes too
                if bare is None:
                    bare = _unescaped(text)
                if not g.could_name(bare):
                    continue
            if not g.spaced:
                if words is None:
                    words = shell_words(text)
                if g.any_match(words):
                    return g.glob
            else:  # the shell's own reading of the words (a separator or wildcard)
                if commands is None:
                    commands = command_words(text)
                if g.any_match(commands):
                    return g.glob
        return None
