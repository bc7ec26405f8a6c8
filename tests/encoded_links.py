"""Links written in every encoding a reader decodes (C4.6, D10.8): generated, never read
back by the code under test.

A link is written from its parts: each character of its scheme, ``://`` and host is
spelt literally or as a character reference the WHATWG tokenizer decodes (every name of
the HTML5 table ``html.entities.html5`` whose value starts the rest, multi-character
values such as ``&fjlig;`` included; the legacy names without their semicolon where the
next character does not continue them; decimal and hexadecimal numeric references with
leading zeros, either case of ``x`` and with or without the semicolon where the next
character is no digit of the reference), a host character as a percent-encoded triplet
(the WHATWG host parser decodes it), an ASCII punctuation character behind a Markdown
backslash escape (in the Markdown forms only); the path and query as written. The link
is then put in one of the forms a reader renders: HTML attributes quoted and unquoted,
Markdown inline links and images (with a title), a reference-style definition, an
autolink, HTML inside Markdown, plain text, or percent-encoded in another URL's query.
"""

from __future__ import annotations

from html.entities import html5
from urllib.parse import quote

from hypothesis import strategies as st

#: every name of the HTML5 table, by the first character of its value
NAMES: dict[str, list[tuple[str, str]]] = {}
for _name, _value in html5.items():
    NAMES.setdefault(_value[0], []).append((_name, _value))
for _names in NAMES.values():
    _names.sort()

DEC = frozenset("0123456789")
HEX = frozenset("0123456789abcdefABCDEF")
ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
#: the forms a link is written in; ``md`` says whether Markdown escapes apply
FORMS: tuple[tuple[str, bool], ...] = (
    ('<img src="{}">', False),
    ("<a href='{}'>here</a>", False),
    ("<img src={} alt=x>", False),
    ("[here]({})", True),
    ('![x]({} "title")', True),
    ("[here][r]\n\n[r]: {}", True),
    ("<{}>", False),
    # raw HTML inside Markdown: CommonMark passes it through, escapes and all
    ('text <p><img src="{}"></p> text', False),
    ("see {} now", False),
)


def _options(rest: str, host: bool, md: str) -> list[str]:
    """The spellings of the text's first character (or first few, for a name whose value
    is longer): the written text, how many characters it stands for and what it must not
    be followed by (``dec``, ``hex``, ``name``), joined by NUL."""
    c = rest[0]
    n = ord(c)
    out = [f"{c}\0{1}"]
    out += [f"&#{n};\0{1}", f"&#000{n};\0{1}", f"&#x{n:x};\0{1}", f"&#X{n:X};\0{1}"]
    out += [f"&#{n}\0{1}\0dec", f"&#x{n:X}\0{1}\0hex"]
    for name, value in NAMES.get(c, []):
        if rest.startswith(value):
            # a legacy name (no semicolon) may not be followed by what continues a name
            out.append(f"&{name}\0{len(value)}" + ("" if name.endswith(";") else "\0name"))
    if host and c.isascii() and c not in "/:@":
        out.append(f"%{n:02X}\0{1}")
    if c in PUNCT and c not in md:
        out.append(f"\\{c}\0{1}")
    return out


@st.composite
def encoded(draw: st.DrawFn, link: str, md: str) -> str:
    """``link`` with each character of its scheme, ``://`` and host spelt in a drawn way;
    ``md`` is the punctuation not escaped with a backslash (all of it outside Markdown)."""
    scheme, _, after = link.partition("://")
    host_end = len(scheme) + 3 + len(after.split("/", 1)[0])
    pieces: list[tuple[str, str]] = []  # (written, what may not follow it)
    i = 0
    while i < host_end:
        opts = _options(link[i:host_end], i >= len(scheme) + 3, md)
        written, consumed, *guard = draw(st.sampled_from(opts)).split("\0")
        pieces.append((written, guard[0] if guard else ""))
        i += int(consumed)
    tail = link[host_end:]
    out = ""
    for k, (written, guard) in enumerate(pieces):
        nxt = pieces[k + 1][0][:1] if k + 1 < len(pieces) else tail[:1]
        if (guard == "dec" and nxt in DEC) or (guard == "hex" and nxt in HEX):
            written += ";"
        if guard == "name" and (nxt in ALNUM or nxt == "="):
            written += ";"  # every legacy name is in the table with its semicolon too
        out += written
    return out + tail


@st.composite
def written_link(draw: st.DrawFn, link: str, unescaped: str = "") -> str:
    """``link`` encoded and put in a drawn form; in Markdown, the punctuation in
    ``unescaped`` is never escaped (``\\/`` is ``/`` to WHATWG, another path to RFC 3986:
    the canonicaliser grounds neither reading)."""
    form, md = draw(st.sampled_from(FORMS))
    return form.format(draw(encoded(link, unescaped if md else PUNCT)))


def nested(outer: str, link: str) -> str:
    """``link`` percent-encoded in ``outer``'s query (a redirect a server decodes)."""
    return f"{outer}?u={quote(link, safe='')}"
