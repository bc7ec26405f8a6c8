"""Destination grounding: per session, the trusted words beside the untrusted content.

The kernel keeps, per session (trace), the *trusted context* (the user's and system's
own words, recorded by the host, and the results of trusted tools) and the untrusted
content it admitted. In a tainted session the sink gate lets a declared destination
through only when its value is *grounded*: it appears in the trusted context.

"Appears" is defined by one canonicaliser, :func:`canonical_value`, applied to the value
and to every word of the trusted text:

- an e-mail address ``local@domain``: case-folded, the domain by the WHATWG host parser
  (IDNA, trailing dot dropped), so ``Bob@EXAMPLE.com.`` is ``bob@example.com``;
- a URL, or a bare host with an optional path: the WHATWG URL parser's serialisation
  with the ``http``/``https`` scheme, the fragment and a trailing ``/`` dropped, so
  ``https://WWW.Example.com/`` and ``www.example.com`` are the same place and
  ``www.example.com/x`` another one. A URL whose hosts under the readings of
  :mod:`fak_core.hosts` disagree (WHATWG vs RFC 3986) has no canonical form: it is never
  grounded;
- an IBAN-shaped value (two letters, two digits, 11 to 30 letters or digits, spaces
  anywhere): its letters and digits, case-folded, so ``GB29 NWBK 6016 1331 9268 19`` in
  the user's words grounds ``GB29NWBK60161331926819``;
- anything else: its words (split at white space, surrounding punctuation stripped,
  NFKC, case-folded) joined by one space, grounded when that word sequence occurs in a
  trusted text as whole words (``Alice`` appears in "send it to Alice.", ``Al`` does not).

A value that appears in both trusted and untrusted content is grounded: the trusted
mention is an independent authority (the user named that destination), and the untrusted
copy adds nothing the attacker could not have written anyway. Untrusted content is kept
only to say in a refusal where an ungrounded value came from.

Memory is bounded in bytes per session (``trusted_bytes``, ``untrusted_bytes``: the
oldest texts leave first; a single trusted text is cut to a quarter of its bound, an
untrusted one to its bound, before it is read) and across
sessions (``max_bytes``: the least recently used session leaves first). Forgetting is
fail-closed: lost trusted context grounds nothing. Recording is linear in the (bounded)
text; a check is linear in the session's trusted text.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
import unicodedata
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import ada_url

from fak_core.hosts import HostError, destination_hosts, names_network_host
from fak_core.linkviews import decoded_views
from fak_core.nonblocking import nonblocking

__all__ = [
    "DEFAULT_GROUNDING_BYTES",
    "DEFAULT_TRUSTED_BYTES",
    "DEFAULT_UNTRUSTED_BYTES",
    "GroundingStore",
    "NotAnIndex",
    "canonical_value",
    "destination_pieces",
    "looked_up",
    "resolve_pointer",
]

DEFAULT_TRUSTED_BYTES = 256 << 10
DEFAULT_UNTRUSTED_BYTES = 1 << 20
DEFAULT_GROUNDING_BYTES = 64 << 20
#: A destination value longer than this is never grounded.
MAX_VALUE_CHARS = 2048
_OVERHEAD = 96
_LEAD = "\"'([{<*`"
_TRAIL = "\"'.,;:!?)]}>*`"
_EMAIL = re.compile(r"^[^@\s]++@[^@\s]++$")
_IBAN_HEAD = re.compile(r"^[a-z]{2}[0-9]{2}[a-z0-9]*+$")
_IBAN = re.compile(r"^[a-z]{2}[0-9]{2}[a-z0-9]{11,30}+$")
# a host or URL, a full stop, then a capitalised word with no space between them
_RUN_ON = re.compile(r"(?<!\S)([^\s.]++(?:\.[^\s.]++)*?\.[a-z]{2,63}+)\.[A-Z][a-z]++")


def _digest(origin: str, text: str, person: bytes = b"") -> bytes:
    """Which trusted text this is (a session records each text once); ``person`` keeps
    another kind of chunk (a result's identifiers) apart from every text. The pair is
    written as one JSON array, so no origin and text pair reads as another (a separator
    could occur in either)."""
    data = json.dumps([origin, text]).encode("ascii")
    return hashlib.blake2b(data, digest_size=16, person=person).digest()


def _specials_cost(specials: frozenset[tuple[str, str]]) -> int:
    """What a chunk's index costs: each canonical form's UTF-8 bytes plus 48."""
    return sum(len(s[1].encode("utf-8", "surrogatepass")) + 48 for s in specials)


def _words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKC", text).casefold()
    out = []
    for raw in folded.split():
        w = raw.lstrip(_LEAD).rstrip(_TRAIL)
        if w:
            out.append(w)
    return out


#: Characters that end a destination written inside a word of free text: quotes,
#: brackets and the back quote, which RFC 3986 never leaves unencoded in a URI and
#: Markdown and HTML put around links (``[text](https://x/)``, ``href="https://x/"``).
_PIECE_SPLIT = re.compile(r"[\"'()<>\[\]{}`]++")
#: where a link starts inside a run: at a ``://`` (its scheme walked back to) or ``mailto:``
_LINK_START = re.compile(r"://|mailto:", re.IGNORECASE)
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")


def _link_starts(piece: str) -> set[int]:
    """Where links start inside ``piece``: each ``scheme://`` at its scheme (RFC 3986's
    scheme characters before the ``://``), each ``mailto:``. Linear: a walk back stops at
    the ``:`` or ``/`` that ends the link before."""
    starts = {0}
    for m in _LINK_START.finditer(piece):
        start = m.start()
        if m.group() == "://":
            while start and piece[start - 1] in _SCHEME_CHARS:
                start -= 1
        starts.add(start)
    return starts


def destination_pieces(word: str) -> list[str]:
    """Every string inside one word of free text that a reader may take for a link: the
    word (when it holds quotes or brackets, only if it has a ``://``), each run between
    quotes and brackets, cut where a ``scheme://`` or ``mailto:`` starts (``see:https://x/``,
    ``x.org/r?u=https://y/``); surrounding punctuation stripped. Linear in the word."""
    pieces = _PIECE_SPLIT.split(word)
    # a URL may hold brackets ("/wiki/Foo_(bar)", "[::1]"): then the whole word is one too
    out = [word] if len(pieces) == 1 or "://" in word else []
    for piece in pieces:
        cuts = sorted(_link_starts(piece))
        out.extend(piece[a:b] for a, b in pairwise([*cuts, len(piece)]))
    stripped = (p.lstrip(_LEAD).rstrip(_TRAIL) for p in out)
    return [p for p in dict.fromkeys(stripped) if p]


def _ascii_lower(text: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in text)


#: IDNA's deviation characters: IDNA 2003 (Python's ``idna`` codec, so ``urllib`` and
#: ``http.client``) maps them away (``faß.de`` is ``fass.de``), IDNA 2008 and WHATWG keep
#: them (``xn--fa-hia.de``), so a host holding one names two places.
_DEVIATIONS = frozenset("\u00df\u03c2\u200c\u200d")


def _host(text: str) -> str | None:
    """The WHATWG host of an authority, one trailing dot dropped; None when it has none
    or it holds an IDNA deviation character (two readings, two places)."""
    url = "http://" + text
    if not ada_url.check_url(url):
        return None
    host = ada_url.URL(url).hostname
    for label in host.split("."):
        if label.startswith("xn--"):
            try:
                decoded = label[4:].encode("ascii").decode("punycode")
            except (UnicodeError, ValueError):
                return None
            if _DEVIATIONS.intersection(decoded):
                return None
    return host[:-1] if host.endswith(".") else host


_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})?")
_UNRESERVED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")


def _unpercent(m: re.Match[str]) -> str:
    if m.group(1) is None:  # a lone "%" is itself (WHATWG percent-decode): "%25"
        return "%25"
    c = chr(int(m.group(1), 16))
    return c if c in _UNRESERVED else "%" + m.group(1).upper()


def _url(text: str) -> str | None:
    """The canonical location of a URL or bare host[/path]; None if it has none: the
    scheme (if http or https), the fragment and a trailing ``/`` dropped, the host by the
    WHATWG host parser, path and query as written up to RFC 3986's percent-encoding
    normalisation (hex digits in upper case, unreserved characters decoded)."""
    low = text.lower()
    shaped = "://" in text or low.startswith(("mailto:", "http:", "https:"))
    candidate = text if shaped else "http://" + text
    if not ada_url.check_url(candidate):
        return None
    url = ada_url.URL(candidate)
    if not url.hostname:
        return None
    try:
        readings = {h.name for h in destination_hosts(text)}
    except HostError:
        return None
    host = _host(url.host)
    if host is None or readings - {host, host.strip("[]")}:
        return None  # the readings disagree on the host: ambiguous, never grounded
    scheme = "" if url.protocol in ("http:", "https:") else url.protocol + "//"
    auth = url.username + (":" + url.password if url.password else "")
    head = scheme + (auth + "@" if auth else "") + host + (":" + url.port if url.port else "")
    path = _PERCENT.sub(_unpercent, url.pathname).rstrip("/")
    return head + path + _PERCENT.sub(_unpercent, url.search)


def _email(text: str) -> str | None:
    """``local@domain`` with the local part as written but for ASCII case (RFC 5321: a
    mailbox is its local part's exact text; hosts fold only ASCII case) and the domain by
    the WHATWG host parser; a leading ``mailto:`` names the same mailbox."""
    if text[:7].lower() == "mailto:":
        text = text[7:]
    if not _EMAIL.match(text):
        return None
    local, _, domain = text.rpartition("@")  # both non-empty: the pattern says so
    if any(c in domain for c in ":/\\?#%"):
        return None
    host = _host(domain)
    return f"{_ascii_lower(local)}@{host}" if host else None


def _special(word: str) -> tuple[str, str] | None:
    """A word's canonical form when it is an e-mail address or a URL/host (as written:
    folding it first would merge places the parsers keep apart, ``faß.de`` and
    ``fass.de``); IBANs are read from the folded words."""
    email = _email(word)
    if email is not None:
        return ("email", email)
    # an ASCII word names a host only with a dot, a colon or a percent-encoded dot; any
    # other word is read (UTS 46 maps the ideographic and fullwidth full stops to dots)
    if (not word.isascii() or any(c in word for c in ".:%")) and names_network_host(word):
        url = _url(word)
        if url is not None:
            return ("url", url)
    return None


def canonical_value(value: str) -> tuple[str, str]:
    """``(kind, canonical)`` of a destination value; kind is email, url, iban or text."""
    if len(value) > MAX_VALUE_CHARS:
        return ("text", "")  # never grounded
    return _canonical(value)


def looked_up(value: str) -> tuple[str, str] | None:
    """The canonical form a check looks up (whether a value is grounded, which untrusted
    text holds it, in both stores), or None when it has none (longer than
    :data:`MAX_VALUE_CHARS`, or no canonical form): such a value is never grounded and
    names no origin."""
    kind, canon = canonical_value(value)
    return (kind, canon) if canon else None


@functools.lru_cache(maxsize=1024)  # destinations repeat; at most 1024 values of <= 2 KiB
def _canonical(value: str) -> tuple[str, str]:
    v = unicodedata.normalize("NFKC", value).strip().casefold()
    compact = "".join(v.split())
    if _IBAN.match(compact):
        return ("iban", compact)
    words = _words(v)
    raw = value.split()
    if len(words) == 1 and len(raw) == 1:
        word = raw[0].lstrip(_LEAD).rstrip(_TRAIL)
        special = _special(word)
        if special is not None:
            return special
        if "://" in words[0] or names_network_host(words[0]) or _special(words[0]) is not None:
            # URL-shaped with no canonical form, or a destination only once folded
            # (a fullwidth e-mail address): never grounded
            return ("url", "")
    return ("text", " ".join(words))


def _ibans(words: list[str]) -> set[tuple[str, str]]:
    """The IBANs among folded words, whole or written in groups."""
    found: set[tuple[str, str]] = set()
    n = len(words)
    for i, w in enumerate(words):
        if _IBAN.match(w):
            found.add(("iban", w))
        if _IBAN_HEAD.match(w) and len(w) < 15:
            # an IBAN written in groups: join the short alphanumeric groups that follow
            joined, j = w, i + 1
            while j < n and len(joined) < 34 and len(words[j]) <= 4 and words[j].isalnum():
                joined += words[j]
                j += 1
                if len(joined) >= 15 and _IBAN.match(joined):
                    found.add(("iban", joined))
    return found


def _scan(text: str) -> tuple[str, frozenset[tuple[str, str]]]:
    """The text's words (joined by one space) and the canonical specials in it."""
    words = _words(text)
    specials: set[tuple[str, str]] = set()
    for view in decoded_views(text):  # what each reader of the text decodes (C4.6)
        for raw in view.split():
            for piece in destination_pieces(raw):
                s = _special(piece)
                if s is not None:
                    specials.add(s)
    specials.update(_ibans(words))
    # a sentence that ends in a host with no space after its full stop ("see x.com.Then")
    for m in _RUN_ON.finditer(text):
        s = _special(m.group(1))
        if s is not None:
            specials.add(s)
    specials.update(("word", w) for w in words)  # a one-word value is one lookup
    # padded with a space at each end, so a word sequence is found as " seq "
    return " " + " ".join(words) + " ", frozenset(specials)


@dataclass
class _Chunk:
    origin: str
    text: str
    specials: frozenset[tuple[str, str]]
    cost: int = 0
    digest: bytes = b""


@dataclass
class _Session:
    trusted: deque[_Chunk] = field(default_factory=deque)
    seen: set[bytes] = field(default_factory=set)
    #: How many trusted chunks hold each canonical special (one lookup per check).
    specials: dict[tuple[str, str], int] = field(default_factory=dict)
    untrusted: deque[tuple[str, str]] = field(default_factory=deque)
    trusted_cost: int = 0
    untrusted_cost: int = 0

    @property
    def cost(self) -> int:
        return self.trusted_cost + self.untrusted_cost + _OVERHEAD


@nonblocking
class GroundingStore:
    """Per-session trusted context and untrusted content, bounded in bytes."""

    def __init__(
        self,
        trusted_bytes: int = DEFAULT_TRUSTED_BYTES,
        untrusted_bytes: int = DEFAULT_UNTRUSTED_BYTES,
        max_bytes: int = DEFAULT_GROUNDING_BYTES,
    ) -> None:
        if min(trusted_bytes, untrusted_bytes, max_bytes) < 1:
            raise ValueError("grounding bounds must be positive byte counts")
        self.trusted_bytes = trusted_bytes
        self.untrusted_bytes = untrusted_bytes
        self.max_bytes = max_bytes
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        #: Sessions dropped at the byte bound (their trusted context grounds nothing now).
        self.evicted = 0

    # ------------------------------------------------------------------ recording
    def _session(self, trace_id: str) -> _Session:
        s = self._sessions.get(trace_id)
        if s is None:
            s = self._sessions[trace_id] = _Session()
            self._bytes += _OVERHEAD + len(trace_id)
        self._sessions.move_to_end(trace_id)
        return s

    def record_trusted(self, trace_id: str, text: str, origin: str = "user") -> None:
        """Add the user's, the system's or a trusted tool's words to the session. A text
        the session already holds (a proxy sees the whole history every turn) is skipped."""
        # a text, its words and their index must fit the bound together: a quarter of it
        text = text[: self.trusted_bytes // 4]
        digest = _digest(origin, text)
        known = self._sessions.get(trace_id)
        if known is not None and digest in known.seen:
            with self._lock:
                if trace_id in self._sessions:
                    self._sessions.move_to_end(trace_id)
            return
        words, specials = _scan(text)
        self._append(trace_id, _Chunk(origin, words, specials, digest=digest))

    def record_identifiers(self, trace_id: str, values: list[str], origin: str) -> None:
        """Add identifier values (:mod:`fak_core.identifiers`) to the session's trusted
        context, each grounding a destination equal to it as a whole value, never its words
        (:meth:`_identifier_chunk` says which). The session records the same identifiers of
        one tool once."""
        chunk = self._identifier_chunk(values, origin)
        if chunk is not None:
            self._append(trace_id, chunk)

    def _identifier_chunk(self, values: list[str], origin: str) -> _Chunk | None:
        """The trusted chunk of one result's identifiers (None if it has none). A value with
        no canonical form (empty, blank, longer than the longest destination) is skipped;
        the distinct others are kept in order while they fit in a quarter of the session's
        trusted bound (each its canonical form's UTF-8 bytes plus 48, the result
        :data:`_OVERHEAD` more), and the rest dropped, so the user's words are not pushed
        out."""
        keys: dict[tuple[str, str], None] = {}
        budget = self.trusted_bytes // 4 - _OVERHEAD
        for value in values:
            kind, canon = canonical_value(value)
            if not canon:
                continue
            key = (kind, canon) if kind != "text" else ("ident", canon)
            if key in keys:
                continue
            cost = len(canon.encode("utf-8", "surrogatepass")) + 48
            if cost > budget:
                break
            budget -= cost
            keys[key] = None
        if not keys:
            return None
        # one JSON text names the set unambiguously (any separator could occur in a value),
        # hashed apart from every text: no text recorded under the tool's name stands for it
        digest = _digest(origin, json.dumps(sorted(keys)), b"identifiers")
        return _Chunk(origin, "", frozenset(keys), digest=digest)

    def _append(self, trace_id: str, chunk: _Chunk) -> None:
        """Add one trusted chunk under the session's byte bound (oldest chunks leave)."""
        specials, digest = chunk.specials, chunk.digest
        text_cost = len(chunk.text.encode("utf-8", "surrogatepass"))
        cost = text_cost + _specials_cost(specials) + _OVERHEAD
        chunk.cost = cost
        with self._lock:
            s = self._session(trace_id)
            if digest in s.seen:
                return
            s.trusted.append(chunk)
            s.seen.add(digest)
            counts = s.specials
            for key in specials:
                counts[key] = counts.get(key, 0) + 1
            s.trusted_cost += cost
            self._bytes += cost
            while s.trusted_cost > self.trusted_bytes and s.trusted:
                old = s.trusted.popleft()
                s.seen.discard(old.digest)
                for key in old.specials:
                    left = s.specials[key] - 1
                    if left:
                        s.specials[key] = left
                    else:
                        del s.specials[key]
                s.trusted_cost -= old.cost
                self._bytes -= old.cost
            self._bound()

    def record_trusted_many(self, trace_id: str, items: list[tuple[str, str]]) -> None:
        """A proxied turn's user and system words (``(origin, text)`` pairs): each distinct
        text once, where it first appears; the texts the session holds when the turn
        starts are skipped (a proxy sends the whole conversation every turn). This is what
        a shared store does in one script, so both keep the same texts."""
        s = self._sessions.get(trace_id)
        held = set() if s is None else set(s.seen)
        done: set[bytes] = set()
        for origin, text in items:
            digest = _digest(origin, text[: self.trusted_bytes // 4])
            if digest in done or digest in held:
                continue
            done.add(digest)
            self.record_trusted(trace_id, text, origin)
        if held and len(done) < len(items):  # a text it holds: the session was used now
            with self._lock:
                if trace_id in self._sessions:
                    self._sessions.move_to_end(trace_id)

    def record_untrusted(self, trace_id: str, text: str, origin: str) -> None:
        """Keep untrusted content (cut to the bound) only to name it in a refusal."""
        text = text[: self.untrusted_bytes]
        cost = len(text.encode("utf-8", "surrogatepass")) + len(origin) + _OVERHEAD
        with self._lock:
            s = self._session(trace_id)
            s.untrusted.append((origin, text))
            s.untrusted_cost += cost
            self._bytes += cost
            while s.untrusted_cost > self.untrusted_bytes and s.untrusted:
                o, t = s.untrusted.popleft()
                gone = len(t.encode("utf-8", "surrogatepass")) + len(o) + _OVERHEAD
                s.untrusted_cost -= gone
                self._bytes -= gone
            self._bound()

    def _bound(self) -> None:
        """Past the total, drop the least recently recorded sessions, never the most recent
        one (the session the caller just recorded to, moved last by :meth:`_session`): a
        session alone over the total stays. At most one turn per other session, so the
        walk ends whatever it meets."""
        for _ in range(len(self._sessions) - 1):
            if self._bytes <= self.max_bytes:
                return
            old, s = self._sessions.popitem(last=False)
            self._bytes -= s.cost + len(old)
            self.evicted += 1

    def reset(self, trace_id: str) -> None:
        """Forget the session's trusted context and untrusted content."""
        with self._lock:
            s = self._sessions.pop(trace_id, None)
            if s is not None:
                self._bytes -= s.cost + len(trace_id)

    # ------------------------------------------------------------------ checking
    def grounded(self, trace_id: str, value: str) -> bool:
        """Whether ``value`` appears (canonically) in the session's trusted context."""
        form = looked_up(value)
        s = self._sessions.get(trace_id)
        if form is None or s is None:
            return False
        kind, canon = form
        if kind != "text":
            return (kind, canon) in s.specials
        if ("ident", canon) in s.specials:
            return True  # a whole identifier value (:meth:`record_identifiers`)
        if " " not in canon:
            return ("word", canon) in s.specials
        needle = f" {canon} "
        return any(needle in c.text for c in tuple(s.trusted))

    def origin_of(self, trace_id: str, value: str) -> str | None:
        """The origin of the first untrusted text that holds ``value``'s words, if any."""
        s = self._sessions.get(trace_id)
        form = looked_up(value)
        if s is None or form is None:
            return None
        kind, canon = form
        for origin, text in tuple(s.untrusted):
            words, specials = _scan(text)
            if (kind, canon) in specials or (kind == "text" and f" {canon} " in words):
                return origin
        return None

    def stats(self) -> dict[str, int]:
        return {
            "grounding_sessions": len(self._sessions),
            "grounding_bytes": self._bytes,
            "grounding_bytes_limit": self.max_bytes,
            "grounding_evicted": self.evicted,
        }

    def __len__(self) -> int:
        return len(self._sessions)


_MISSING = object()
#: RFC 6901's ``array-index``: ``0``, or ASCII digits without a leading zero.
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True)
class NotAnIndex:
    """What a pointer names when one of its tokens meets an array and is not an RFC 6901
    array index (a leading zero, a digit that is not ASCII, a sign, a letter): no element,
    and not nothing either, since a reader less strict than the RFC may take it for one."""

    token: str


def resolve_pointer(doc: Any, pointer: str) -> Any:
    """The value at a JSON Pointer (RFC 6901) in ``doc``; a sentinel when absent (also
    ``-``, the element past the end), a :class:`NotAnIndex` when a token that is not an
    array index meets an array."""
    if pointer == "":
        return doc
    cur = doc
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if type(cur) is dict:
            if token not in cur:
                return _MISSING
            cur = cur[token]
        elif type(cur) is list:
            if token == "-":
                return _MISSING
            if not _ARRAY_INDEX.fullmatch(token):
                return NotAnIndex(token)
            # more digits than the length has is past the end (and never a huge int())
            if len(token) > len(str(len(cur))) or int(token) >= len(cur):
                return _MISSING
            cur = cur[int(token)]
        else:
            return _MISSING
    return cur


def is_missing(value: Any) -> bool:
    return value is _MISSING
