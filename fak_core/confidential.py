"""Confidential values (policy v2): what a tainted session may not write to a sink.

Grounding (:mod:`fak_core.grounding`) decides *where* a sink call in a tainted session may
go; a confidential value decides *what* it may not carry. A ``fak-policy/v2`` tool
declaration may list ``confidential``: JSON Pointers into the tool's result (``*`` for
every element or member, :func:`fak_core.identifiers.identifier_values`) whose values are
the user's secrets (a passport or card number, an account password, a security code).
The kernel keeps them per session; in a tainted session the sink gate refuses a declared
sink whose arguments carry one, even to a grounded destination (the user named their
wife's address; the injection sends her the card number).

"Carries" is one comparison, :func:`compact`: a value's letters and digits, NFKC and
case-folded, with everything else dropped, so ``4237-4252-7456-2574`` is carried by
``card 4237 4252 7456 2574`` and ``HGK137803`` by ``passport: hgk 137 803``. A call
carries a value when the value's compact form occurs in the compact form of any string or
number in its arguments (at any depth, table keys included). A value with fewer than
:data:`MIN_CHARS` letters and digits is not kept (it would occur everywhere): the operator
declares only fields that hold such values. A value rewritten otherwise (spelt out,
encoded, translated) is not recognised: this is a check of copies, not of meaning.

Memory is bounded: at most :data:`MAX_VALUES` values per session and ``max_sessions``
sessions. A session that had to drop a value *overflows*, and from then on carries a
secret on every call (fail-closed) until it is reset; the least recently used session
leaves first, and its trace id's bucket (one of :data:`FORGOTTEN_BUCKETS`, by a hash of
the id) is marked: a session that is not kept but whose bucket is marked carries a secret
on every call too, since it may be one that was forgotten, and one that starts keeping
values again in a marked bucket starts overflowed (the values it kept before it was
evicted are gone): forgotten never reads as clean; the cost is that sessions sharing a
bucket with an evicted one are refused as well.

The store lives in the kernel's process. Replicas that share their other state
(``fak serve --state``) get :class:`fak_core.redis_confidential.RedisConfidential`, the
same answers from Redis. :class:`UnsharedConfidential` is a store that cannot see values
recorded on another replica: it answers that every call may carry a secret.
"""

from __future__ import annotations

import hashlib
import threading
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from fak_core.nonblocking import nonblocking

__all__ = [
    "FORGOTTEN_BUCKETS",
    "MAX_VALUES",
    "MIN_CHARS",
    "ConfidentialStore",
    "UnsharedConfidential",
    "compact",
]

#: A value with fewer letters and digits than this is not kept.
MIN_CHARS = 6
#: Values kept per session; one more overflows it (fail-closed).
MAX_VALUES = 256
#: A value longer than this (in characters) is cut to it before it is kept.
MAX_VALUE_CHARS = 512
#: Buckets that remember (by a hash of the trace id) that an evicted session lived there.
FORGOTTEN_BUCKETS = 4096


def _bucket(trace_id: str) -> int:
    digest = hashlib.blake2b(trace_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % FORGOTTEN_BUCKETS


def compact(text: str) -> str:
    """The letters and digits of ``text``, NFKC and case-folded, nothing else."""
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


@dataclass
class _Session:
    values: dict[str, str] = field(default_factory=dict)
    overflow: bool = False


def _texts(value: Any) -> list[str]:
    """Every string and number in ``value`` at any depth (table keys included)."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is str:
            out.append(v)
        elif type(v) is int or type(v) is float:
            out.append(repr(v))
        elif type(v) is dict:
            out.extend(k for k in v if type(k) is str)
            stack.extend(v.values())
        elif type(v) is list:
            stack.extend(v)
    return out


@nonblocking
class ConfidentialStore:
    """Per-session confidential values, bounded in count per session and in sessions."""

    def __init__(self, max_sessions: int = 65536) -> None:
        if max_sessions < 1:
            raise ValueError("max_sessions must be positive")
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._forgotten = bytearray(FORGOTTEN_BUCKETS)
        self._lock = threading.Lock()

    def _fresh(self, trace_id: str) -> _Session:
        """A new session; overflowed when its bucket is marked: it may be one evicted
        before, whose values are gone (forgotten never reads as clean)."""
        return _Session(overflow=bool(self._forgotten[_bucket(trace_id)]))

    def record(self, trace_id: str, values: list[str], origin: str) -> None:
        """Keep ``values`` (from ``origin``) as the session's confidential values."""
        kept = [(c, origin) for c in (compact(v[:MAX_VALUE_CHARS]) for v in values)]
        kept = [(c, o) for c, o in kept if len(c) >= MIN_CHARS]
        if not kept:
            return
        with self._lock:
            s = self._sessions.get(trace_id)
            if s is None:
                s = self._sessions[trace_id] = self._fresh(trace_id)
                while len(self._sessions) > self.max_sessions:
                    gone, _ = self._sessions.popitem(last=False)
                    self._forgotten[_bucket(gone)] = 1
            self._sessions.move_to_end(trace_id)
            for c, o in kept:
                if c in s.values:
                    continue
                if len(s.values) >= MAX_VALUES:
                    s.overflow = True
                    break
                s.values[c] = o

    def reset(self, trace_id: str) -> None:
        with self._lock:
            self._sessions.pop(trace_id, None)

    def carried(self, trace_id: str, args: Any) -> tuple[str, str] | None:
        """``(pointer, origin)`` of the first argument carrying a confidential value of the
        session (``pointer`` is the top-level argument, ``""`` for the whole), or None."""
        s = self._sessions.get(trace_id)
        if s is None:
            if self._forgotten[_bucket(trace_id)]:
                return ("", "a session whose confidential values may have been forgotten")
            return None
        if s.overflow:
            return ("", "more confidential values than the session keeps, or forgotten ones")
        values = tuple(s.values.items())
        if not values:
            return None
        parts = list(args.items()) if type(args) is dict else [("", args)]
        for key, value in parts:
            pointer = "/" + key.replace("~", "~0").replace("/", "~1") if type(args) is dict else ""
            texts = _texts(value) + ([key] if type(args) is dict else [])
            for text in texts:
                c = compact(text)
                for secret, origin in values:
                    if secret in c:
                        return (pointer, origin)
        return None

    def __len__(self) -> int:
        return len(self._sessions)


class UnsharedConfidential(ConfidentialStore):
    """The store of a replica whose other state is shared: values recorded on another
    replica cannot be seen here, so every call may carry one (fail-closed)."""

    def carried(self, trace_id: str, args: Any) -> tuple[str, str] | None:
        return ("", "a session whose confidential values are kept on another replica")
