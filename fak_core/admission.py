"""Result admission: screen what a tool returned before the agent's context sees it.

The built-in :class:`ResultScreen` quarantines secret-shaped and injection-shaped results
and pages out oversize ones. The kernel applies the folded verdict: a quarantined
result's bytes go to the :class:`HeldStore` and the payload becomes a stub naming the
quarantine id and reason; an oversize result becomes a pointer stub.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable

from fak_core.calls import Result, ToolCall
from fak_core.reasons import Reason
from fak_core.verdicts import Verdict

__all__ = [
    "DEFAULT_PAGE_OUT_BYTES",
    "HeldStore",
    "INJECTION_MARKERS",
    "SECRET_PATTERNS",
    "ResultScreen",
    "is_stub",
    "page_stub",
    "quarantine_stub",
]

DEFAULT_PAGE_OUT_BYTES = 4096
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
#: Phrases that try to steer the model from inside data (matched case-insensitively).
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


def quarantine_stub(qid: str, reason: str, length: int) -> str:
    return json.dumps(
        {"_quarantined": True, "id": qid, "reason": reason, "len": length}, separators=(",", ":")
    )


def page_stub(ref: str, length: int) -> str:
    return json.dumps(
        {"_paged": True, "ref": ref, "len": length, "hint": "oversize"}, separators=(",", ":")
    )


def is_stub(payload: str) -> bool:
    """Whether a payload is already a kernel stub (re-admitting one changes nothing)."""
    return payload.startswith(('{"_quarantined":true', '{"_paged":true'))


class ResultScreen:
    """The built-in result admitter: secrets and injections → QUARANTINE; oversize → TRANSFORM."""

    def __init__(
        self,
        secret_patterns: Iterable[str] = (),
        page_out_bytes: int = DEFAULT_PAGE_OUT_BYTES,
    ) -> None:
        self.page_out_bytes = page_out_bytes
        self.set_patterns(secret_patterns)

    def set_patterns(self, extra: Iterable[str]) -> None:
        self._secret = re.compile("|".join(f"(?:{p})" for p in (*SECRET_PATTERNS, *extra)))
        self._inject = re.compile("|".join(re.escape(m) for m in INJECTION_MARKERS), re.I)

    def admit(self, call: ToolCall, result: Result) -> Verdict:
        body = result.payload
        if not body or is_stub(body):
            return Verdict.allow(BY)
        m = self._secret.search(body)
        if m:
            return Verdict.quarantine(
                Reason.RESULT_SECRET_DISCOVERED, BY, meta={"claim": "secret-shaped value in result"}
            )
        m = self._inject.search(body)
        if m:
            return Verdict.quarantine(
                Reason.TRUST_VIOLATION, BY, meta={"claim": f"injection marker {m.group(0)!r}"}
            )
        if len(body.encode("utf-8", "surrogatepass")) > self.page_out_bytes:
            data = body.encode("utf-8", "surrogatepass")
            ref = "sha256:" + hashlib.sha256(data).hexdigest()
            return Verdict.transform(page_stub(ref, len(data)), BY, meta={"paged": ref})
        return Verdict.allow(BY)


class HeldStore:
    """Store of quarantined and paged-out bytes, bounded in count (``limit``) and in bytes
    (``max_bytes``, UTF-8 payload plus key), oldest evicted first (counted in ``evicted``)."""

    def __init__(self, limit: int = DEFAULT_HELD_LIMIT, max_bytes: int = DEFAULT_HELD_BYTES):
        self.limit = limit if limit >= 1 else DEFAULT_HELD_LIMIT
        self.max_bytes = max_bytes if max_bytes >= 1 else DEFAULT_HELD_BYTES
        self._items: OrderedDict[str, str] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._bytes = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.evicted = 0

    def hold(self, payload: str, key: str | None = None) -> str:
        """Keep ``payload``; return its id (``q<n>`` unless a key is given)."""
        size = len(payload.encode("utf-8", "surrogatepass"))
        with self._lock:
            k = key or f"q{next(self._ids)}"
            self._bytes += size + len(k) - self._sizes.get(k, 0)
            self._sizes[k] = size + len(k)
            self._items[k] = payload
            self._items.move_to_end(k)
            while self._items and (len(self._items) > self.limit or self._bytes > self.max_bytes):
                old, _ = self._items.popitem(last=False)
                self._bytes -= self._sizes.pop(old)
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

    def get(self, key: str) -> str | None:
        return self._items.get(key)

    def __len__(self) -> int:
        return len(self._items)
