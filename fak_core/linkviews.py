"""What a receiving format decodes before it reads a link: the decoded views of a text.

A destination written inside content is read by whoever renders it, after that format's
own decoding. The sink gate and the grounding store therefore read links in every view
of a text that a common reader may see (:func:`decoded_views`):

- the text as written (plain text; a Markdown autolink, a URL a mail client links);
- HTML character references decoded as the WHATWG tokenizer's character reference state
  does in *text* (``html.unescape``: the HTML5 named table ``html.entities.html5``, the
  legacy names without a semicolon, decimal and hexadecimal numeric references with or
  without the semicolon and the numeric replacement rules), and as it does inside an
  *attribute value*, where a legacy name without its semicolon followed by ``=`` or an
  ASCII letter or digit stays as written (``href="?a=1&copy=2"``);
  CommonMark decodes the same references in link destinations;
- Markdown's backslash escapes of ASCII punctuation removed (CommonMark: ``[x](https\\://y)``
  is a link to ``https://y``), and then the HTML readings above;
- inside a URL, the links its path or query hold once percent-decoded
  (:func:`percent_nested`): a server decodes its query once, so
  ``https://a.org/r?u=https%3A%2F%2Fevil.example`` sends the reader on to
  ``https://evil.example`` (a URL's own host is percent-decoded by the host parser, which
  the canonicaliser of :mod:`fak_core.grounding` already does; its own path is compared
  as written, ``%2F`` being no ``/``).

A tab, line feed or carriage return that a character reference writes is removed in the
HTML views: the WHATWG URL parser removes them from a URL (``https://a.org&#10;.evil.example``
is ``https://a.org.evil.example``). Python's ``html.unescape`` drops the other control and
noncharacter code points a numeric reference names (browsers keep them; in a URL's scheme
or host they make it no URL at all, in a path they are percent-encoded): dropping them can
only join a link, never hide one.

Each format decodes once: an HTML reader shows ``&amp;#58;`` as ``&#58;`` (a relative URL,
no scheme), a CommonMark renderer decodes a destination's references and writes the
result escaped again for the browser, and the URL parser percent-decodes a host once
(``%252e`` is ``%2e`` there, a forbidden code point). So nested encodings are not decoded
again; the views combine each format's one decoding (Markdown, then HTML, then percent).

Linear: each view is one pass of one regular expression (a reference's name is at most 32
characters, a numeric one of more than 8 digits is past U+10FFFF, U+FFFD, without
converting it), at most 6 views of a text, a view computed only when the text holds the
character it decodes. A text longer than :data:`MAX_LINK_TEXT` characters is not read:
the caller refuses it (:class:`TooLongToRead`).
"""

from __future__ import annotations

import html
import re
from html.entities import html5
from urllib.parse import unquote

__all__ = [
    "MAX_LINK_TEXT",
    "TooLongToRead",
    "decoded_views",
    "html_attribute",
    "html_text",
    "percent_nested",
]

#: The most characters of content (per call, all strings together) read for links.
MAX_LINK_TEXT = 1 << 20


class TooLongToRead(ValueError):
    """Content longer than :data:`MAX_LINK_TEXT` characters: not read for links, refused."""

    def __init__(self, chars: int) -> None:
        super().__init__(
            f"{chars} characters of content, over the {MAX_LINK_TEXT} that links are read in"
        )
        self.chars = chars


#: The tokenizer's references, as ``html.unescape`` finds them: a numeric one (decimal or
#: hexadecimal, the semicolon optional), or up to 32 characters of a name.
_CHARREF = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")
#: a numeric reference of more than this many digits (leading zeros aside) is past U+10FFFF
_MAX_DIGITS = 8
#: what the URL parser removes from a URL, when a reference writes it
_URL_REMOVED = frozenset("\t\n\r")
_ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
#: CommonMark: a backslash before ASCII punctuation is the punctuation itself
_MD_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def _numeric(ref: str) -> str:
    head = ref[:2] if ref[1] in "xX" else ref[:1]
    digits = ref[len(head) :].rstrip(";").lstrip("0") or "0"
    if len(digits) > _MAX_DIGITS:
        return "\ufffd"  # past U+10FFFF: the replacement character (and no huge int())
    return html.unescape(f"&{head}{digits};")


def _url_char(text: str) -> str:
    return "" if text in _URL_REMOVED else text


def _in_text(m: re.Match[str]) -> str:
    ref = m.group(1)
    if ref[0] == "#":
        return _url_char(_numeric(ref))
    return _url_char(html.unescape(m.group(0)))


def _in_attribute(m: re.Match[str]) -> str:
    ref = m.group(1)
    if ref[0] == "#":
        return _url_char(_numeric(ref))
    if ref in html5:
        return _url_char(html5[ref])
    # the longest name that is a prefix (only legacy names lack the semicolon)
    for n in range(len(ref) - 1, 1, -1):
        if ref[:n] in html5:
            # in an attribute value a legacy name followed by "=" or an ASCII letter or
            # digit is no reference (WHATWG: "for historical reasons")
            if ref[n] == "=" or ref[n] in _ASCII_ALNUM:
                return m.group(0)
            return _url_char(html5[ref[:n]]) + ref[n:]
    return m.group(0)


def html_text(text: str) -> str:
    """``text`` with its character references decoded as in HTML text."""
    return _CHARREF.sub(_in_text, text)


def html_attribute(text: str) -> str:
    """``text`` with its character references decoded as in an HTML attribute value."""
    return _CHARREF.sub(_in_attribute, text)


def decoded_views(text: str) -> list[str]:
    """Every distinct view of ``text`` a reader may see (module docstring), the text first."""
    bases = [text]
    if "\\" in text:
        bases.append(_MD_ESCAPE.sub(r"\1", text))
    out: list[str] = []
    for base in bases:
        out.append(base)
        if "&" in base:
            out.append(html_text(base))
            out.append(html_attribute(base))
    return list(dict.fromkeys(out))


def percent_nested(word: str) -> list[str]:
    """The words of ``word`` once percent-decoded (a server's one decoding of its path
    and query), ``[]`` when it holds no ``%``. The caller reads links in them past the
    first position (:func:`fak_core.sinks.embedded_destinations`): the URL itself is read
    as written."""
    if "%" not in word:
        return []
    return unquote(word, errors="replace").split()
