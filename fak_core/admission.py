"""Result admission: screen what a tool returned before the agent's context sees it.

The built-in :class:`ResultScreen` quarantines secret-shaped and injection-shaped results
and pages out oversize ones. The kernel applies the folded verdict: a quarantined
result's bytes go to the :class:`HeldStore` and the payload becomes a stub naming the
quarantine id and reason; an oversize result becomes a pointer stub.

Every result is screened. The one exception is a stub this kernel minted itself and still
holds (:meth:`HeldStore.minted`: an exact match against the stubs the store issued, never
a look at the text's shape), so re-admitting it is not held twice; a result that merely
looks like a stub is screened like any other. Injection markers are literal phrases
matched on :func:`normalize_text` of the result (Unicode NFKC, case-folded, format,
control and combining characters removed, white space collapsed), so zero-width,
full-width, bidi and case tricks do not hide them; secret shapes are searched in the raw
text and in its NFKC form with those characters removed. Every pattern is either a
literal alternation or a regex searched once over the text: linear in the result.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from fak_core.calls import Result, ToolCall
from fak_core.patterns import PolicyPattern, compile_policy_pattern
from fak_core.reasons import Reason
from fak_core.verdicts import Verdict

__all__ = [
    "DEFAULT_PAGE_OUT_BYTES",
    "MIN_PAGE_OUT_BYTES",
    "HeldStore",
    "INJECTION_MARKERS",
    "SECRET_PATTERNS",
    "ResultScreen",
    "ScreenConfig",
    "ToolScreen",
    "normalize_text",
    "page_stub",
    "quarantine_stub",
]

DEFAULT_PAGE_OUT_BYTES = 4096
#: The smallest page-out size a screen accepts: a page stub always fits below it.
MIN_PAGE_OUT_BYTES = 256
#: Bounds on configured markers (each, after normalisation) so matching stays cheap.
MAX_MARKER_CHARS = 256
MAX_MARKERS = 1024
DEFAULT_HELD_LIMIT = 8192
#: Bytes of held payloads (UTF-8) before the oldest is evicted.
DEFAULT_HELD_BYTES = 256 << 20
BY = "result-screen"

#: Secret shapes: provider keys, cloud keys, private keys, tokens. They are searched for in
#: whole results, so none may backtrack: an open-ended run is possessive (``{20,}+``), and
#: the key label of a PEM header (letters and spaces of length 2 or more, ending in a
#: space) is read one possessive word at a time, trying the rest after each word.
SECRET_PATTERNS = (
    r"sk-[A-Za-z0-9_\-]{20,}+",
    r"AKIA[0-9A-Z]{16}",
    r"-----BEGIN (?:[A-Z ](?:[A-Z]*+ )+?)?PRIVATE KEY-----",
    r"gh[pousr]_[A-Za-z0-9]{30,}+",
    r"xox[abposr]-[A-Za-z0-9\-]{10,}+",
    r"AIza[0-9A-Za-z_\-]{35}",
)
_BUILTIN_SECRET = re.compile("|".join(f"(?:{p})" for p in SECRET_PATTERNS))
#: Phrases that try to steer the model from inside data (matched on the normalised text).
INJECTION_MARKERS = (
    "ignore previous instructions",
    "ignore all previous instructions",
    "disregard previous instructions",
    "ignore the above",
    "you are now",
    "system override",
    "new instructions:",
    "###system",
    "reveal your system prompt",
    "exfiltrate",
)


class _Table(dict[int, int | None]):
    """``str.translate`` table: combining marks (Mn, Me) are deleted; format (Cf) and
    non-space control (Cc) characters are deleted, or become a space when ``space`` is
    set; everything else maps to itself. Filled on first sight of each character, so no
    table of all of Unicode is built up front."""

    def __init__(self, space: bool) -> None:
        super().__init__()
        self.space = space

    def __missing__(self, code: int) -> int | None:
        ch = chr(code)
        cat = unicodedata.category(ch)
        value: int | None = code
        if cat in ("Mn", "Me"):
            value = None
        elif cat == "Cf" or (cat == "Cc" and not ch.isspace()):
            value = 0x20 if self.space else None
        self[code] = value
        return value


_DELETED = _Table(space=False)
_SPACED = _Table(space=True)
_ASCII_CONTROLS = bytes(c for c in range(128) if c < 32 and not chr(c).isspace()) + b"\x7f"
_ASCII_SPACED = bytes.maketrans(_ASCII_CONTROLS, b" " * len(_ASCII_CONTROLS))


def _stripped(text: str) -> str:
    """NFKC with format, combining and control characters removed (case and spaces kept)."""
    if text.isascii():
        return text.encode("ascii").translate(None, _ASCII_CONTROLS).decode("ascii")
    nfkc = unicodedata.normalize("NFKC", text)
    return unicodedata.normalize("NFKD", nfkc).translate(_DELETED)


def _views(text: str) -> tuple[str, ...]:
    """The normalised forms markers are matched on: hidden characters deleted (so
    ``ig\u00adnore`` reads ``ignore``) and, when there were any, each one a space instead
    (so ``ignore\u200bprevious`` reads ``ignore previous``)."""
    if text.isascii():
        low = text.lower().encode("ascii")
        deleted = low.translate(None, _ASCII_CONTROLS).decode("ascii")
        spaced = low.translate(_ASCII_SPACED).decode("ascii")
    else:
        folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
        deleted = folded.translate(_DELETED)
        spaced = folded.translate(_SPACED)
    one = " ".join(deleted.split())
    if len(spaced) == len(deleted):
        return (one,)
    two = " ".join(spaced.split())
    return (one,) if two == one else (one, two)


def normalize_text(text: str) -> str:
    """The form injection markers are matched on: NFKC, case-folded, decomposed with its
    format (zero-width, bidi, soft hyphen, BOM), combining and control characters removed,
    and every run of white space one space. Linear in the text. (The screen also matches
    a second form in which each removed format or control character is a space.)"""
    return _views(text)[0]


def quarantine_stub(qid: str, reason: str, length: int) -> str:
    return json.dumps(
        {"_quarantined": True, "id": qid, "reason": reason, "len": length}, separators=(",", ":")
    )


def page_stub(ref: str, length: int) -> str:
    return json.dumps(
        {"_paged": True, "ref": ref, "len": length, "hint": "oversize"}, separators=(",", ":")
    )


def _markers(markers: Iterable[str], where: str) -> tuple[str, ...]:
    """Validate and normalise injection markers (a ValueError says which and why)."""
    out: list[str] = []
    for m in markers:
        if not isinstance(m, str):
            raise ValueError(f"{where}: a marker must be a string, not {type(m).__name__}")
        norm = normalize_text(m)
        if not norm:
            raise ValueError(f"{where}: marker {m!r} is empty once normalised")
        if len(norm) > MAX_MARKER_CHARS:
            raise ValueError(f"{where}: marker {m[:40]!r}... is over {MAX_MARKER_CHARS} characters")
        out.append(norm)
    if len(out) > MAX_MARKERS:
        raise ValueError(f"{where}: {len(out)} markers, over the limit of {MAX_MARKERS}")
    return tuple(dict.fromkeys(out))


def _page_out(value: int, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < MIN_PAGE_OUT_BYTES:
        raise ValueError(f"{where} must be an integer >= {MIN_PAGE_OUT_BYTES}, not {value!r}")
    return value


@dataclass(frozen=True)
class ToolScreen:
    """One tool's screen settings: extra markers, and its own page-out size (None: the
    screen's). Validated on construction (ValueError naming the problem)."""

    injection_markers: tuple[str, ...] = ()
    page_out_bytes: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "injection_markers", _markers(self.injection_markers, "injection_markers")
        )
        if self.page_out_bytes is not None:
            _page_out(self.page_out_bytes, "page_out_bytes")


@dataclass(frozen=True)
class ScreenConfig:
    """The result screen's settings (the policy's ``screen`` table).

    ``injection_markers`` are added to :data:`INJECTION_MARKERS` unless
    ``builtin_markers`` is False; ``tools`` adds per-tool markers and page-out sizes.
    """

    injection_markers: tuple[str, ...] = ()
    builtin_markers: bool = True
    page_out_bytes: int = DEFAULT_PAGE_OUT_BYTES
    tools: Mapping[str, ToolScreen] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "injection_markers", _markers(self.injection_markers, "injection_markers")
        )
        if not isinstance(self.builtin_markers, bool):
            raise ValueError("builtin_markers must be true or false")
        _page_out(self.page_out_bytes, "page_out_bytes")
        for name, t in self.tools.items():
            if not isinstance(name, str) or not name:
                raise ValueError("tools: a tool name must be a non-empty string")
            if not isinstance(t, ToolScreen):
                raise ValueError(f"tools.{name}: expected a ToolScreen")
        if not self.builtin_markers and not self.injection_markers:
            raise ValueError(
                "builtin_markers is false and no injection_markers are given: the screen "
                "would look for no injection at all; list the markers to use"
            )

    def markers(self, tool: str | None = None) -> tuple[str, ...]:
        base = _markers(INJECTION_MARKERS, "builtin") if self.builtin_markers else ()
        extra = (
            self.tools[tool].injection_markers if tool is not None and tool in self.tools else ()
        )
        return tuple(dict.fromkeys((*base, *self.injection_markers, *extra)))

    def page_out(self, tool: str) -> int:
        t = self.tools.get(tool)
        return t.page_out_bytes if t is not None and t.page_out_bytes else self.page_out_bytes


@dataclass(frozen=True)
class _Compiled:
    inject: re.Pattern[str]
    page_out_bytes: int


class ResultScreen:
    """The built-in result admitter: secrets and injections → QUARANTINE; oversize → TRANSFORM.

    ``minted`` says whether a text is a stub the kernel issued (the kernel passes its
    :meth:`HeldStore.minted`); only such a text skips the screen.
    """

    def __init__(
        self,
        secret_patterns: Iterable[str] = (),
        page_out_bytes: int = DEFAULT_PAGE_OUT_BYTES,
        *,
        config: ScreenConfig | None = None,
        minted: Callable[[str], bool] | None = None,
    ) -> None:
        self._minted = minted
        self.set_patterns(secret_patterns)
        self.configure(
            config if config is not None else ScreenConfig(page_out_bytes=page_out_bytes)
        )

    def set_patterns(self, extra: Iterable[str]) -> None:
        """Secret shapes: the built-in ones plus ``extra`` (regular expressions).

        The built-in shapes are audited possessive patterns (Python ``re``); ``extra`` comes
        from a policy and is compiled with RE2 (:func:`compile_policy_pattern`): linear.
        """
        extra = tuple(extra)
        self._secret = _BUILTIN_SECRET
        self._extra_secret: PolicyPattern | None = (
            compile_policy_pattern("|".join(f"(?:{p})" for p in extra), "secret_patterns")
            if extra
            else None
        )

    def has_secret(self, text: str) -> bool:
        """Whether ``text`` holds a secret shape, built-in or the policy's."""
        return self._has_secret(text)

    def _has_secret(self, text: str) -> bool:
        if self._secret.search(text) is not None:
            return True
        extra = self._extra_secret
        if extra is None:
            return False
        try:
            return extra.search(text) is not None
        except UnicodeEncodeError:  # a lone surrogate (a host's str; wire JSON has none)
            utf8 = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
            return extra.search(utf8) is not None

    def configure(self, config: ScreenConfig) -> None:
        """Swap the marker and page-out settings (the policy's ``screen`` table)."""
        default = self._compile(config, None)
        per_tool = {t: self._compile(config, t) for t in config.tools}
        self.config, self._default, self._tools = config, default, per_tool

    @staticmethod
    def _compile(config: ScreenConfig, tool: str | None) -> _Compiled:
        markers = config.markers(tool)
        inject = re.compile("|".join(re.escape(m) for m in markers))
        page = config.page_out(tool) if tool is not None else config.page_out_bytes
        return _Compiled(inject, page)

    @property
    def page_out_bytes(self) -> int:
        return self.config.page_out_bytes

    def is_minted(self, text: str) -> bool:
        """Whether ``text`` is a stub this screen's kernel issued and still holds."""
        minted = self._minted
        return minted is not None and minted(text)

    def admit(self, call: ToolCall, result: Result) -> Verdict:
        body = result.payload
        if not body or self.is_minted(body):
            return Verdict.allow(BY)
        rules = self._tools.get(call.tool, self._default)
        stripped = _stripped(body)
        if self._has_secret(body) or (stripped != body and self._has_secret(stripped)):
            return Verdict.quarantine(
                Reason.RESULT_SECRET_DISCOVERED, BY, meta={"claim": "secret-shaped value in result"}
            )
        m = next(filter(None, map(rules.inject.search, _views(body))), None)
        if m:
            return Verdict.quarantine(
                Reason.TRUST_VIOLATION, BY, meta={"claim": f"injection marker {m.group(0)!r}"}
            )
        data = body.encode("utf-8", "surrogatepass")
        if len(data) > rules.page_out_bytes:
            ref = "sha256:" + hashlib.sha256(data).hexdigest()
            return Verdict.transform(page_stub(ref, len(data)), BY, meta={"paged": ref})
        return Verdict.allow(BY)


class HeldStore:
    """Store of quarantined and paged-out bytes, bounded in count (``limit``) and in bytes
    (``max_bytes``, UTF-8 payload plus key), oldest evicted first (counted in ``evicted``).

    It also remembers the stub text issued for each held item (:meth:`hold` with ``stub``),
    so the kernel can tell its own stubs from look-alikes (:meth:`minted`); a stub is
    forgotten with the item it points to.
    """

    def __init__(self, limit: int = DEFAULT_HELD_LIMIT, max_bytes: int = DEFAULT_HELD_BYTES):
        self.limit = limit if limit >= 1 else DEFAULT_HELD_LIMIT
        self.max_bytes = max_bytes if max_bytes >= 1 else DEFAULT_HELD_BYTES
        self._items: OrderedDict[str, str] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._bytes = 0
        self._stub_of: dict[str, str] = {}
        self._stubs: dict[str, str] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.evicted = 0

    def hold(
        self, payload: str, key: str | None = None, *, stub: Callable[[str], str] | None = None
    ) -> str:
        """Keep ``payload``; return its id (``q<n>`` unless a key is given). ``stub(id)``,
        when given, is the stub text issued for it, remembered as minted."""
        size = len(payload.encode("utf-8", "surrogatepass"))
        with self._lock:
            k = key or f"q{next(self._ids)}"
            self._forget_stub(k)
            self._bytes += size + len(k) - self._sizes.get(k, 0)
            self._sizes[k] = size + len(k)
            self._items[k] = payload
            self._items.move_to_end(k)
            if stub is not None:
                text = stub(k)
                self._stub_of[k] = text
                self._stubs[text] = k
            while self._items and (len(self._items) > self.limit or self._bytes > self.max_bytes):
                old, _ = self._items.popitem(last=False)
                self._bytes -= self._sizes.pop(old)
                self._forget_stub(old)
                self.evicted += 1
            return k

    def stats(self) -> dict[str, int]:
        """Counters for ``/healthz``: held payloads, their bytes and bound, evictions."""
        return {
            "held": len(self._items),
            "held_bytes": self._bytes,
            "held_bytes_limit": self.max_bytes,
            "held_evicted": self.evicted,
        }

    def _forget_stub(self, key: str) -> None:
        text = self._stub_of.pop(key, None)
        if text is not None and self._stubs.get(text) == key:
            del self._stubs[text]

    def stub(self, key: str) -> str | None:
        """The stub text issued for ``key`` (None if none was, or it was evicted)."""
        return self._stub_of.get(key)

    def minted(self, text: str) -> bool:
        """Whether ``text`` is exactly a stub this store issued for an item it still holds."""
        return text in self._stubs

    def get(self, key: str) -> str | None:
        return self._items.get(key)

    def __len__(self) -> int:
        return len(self._items)
