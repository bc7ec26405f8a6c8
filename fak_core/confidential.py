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

Memory is bounded in bytes: a kept value is the compact form of the whole value cut to
its first :data:`MAX_VALUE_BYTES` bytes of UTF-8 (whole characters; a prefix occurs
wherever the whole does, so the cut only refuses more), at most :data:`MAX_VALUES` values
per session and ``max_sessions`` sessions. A session that had to drop a value
*overflows*, and from then on carries a secret on every call (fail-closed) until it is
reset. The least recently used session leaves first, and its trace id's bucket (one of
:data:`FORGOTTEN_BUCKETS`, by a hash of the id) is marked for good: a session that is not
kept, or is kept but was created after its bucket was marked (recorded again after it was
evicted or reset), carries a secret on every call too, since it may be one that was
forgotten (forgotten never reads as clean; the cost is that sessions sharing a bucket
with an evicted one are refused as well, and a reset never clears a bucket). A session
kept since before its bucket was marked was never forgotten and reads its own values.

The store lives in the kernel's process. Replicas that share their other state
(``fak serve --state``) get :class:`UnsharedConfidential` instead, which answers that
every call may carry a secret (a value recorded on another replica cannot be seen here),
so a policy that declares confidential fields refuses every tainted sink call there.
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
    "MAX_VALUE_BYTES",
    "MIN_CHARS",
    "ConfidentialStore",
    "UnsharedConfidential",
    "compact",
]

#: A value with fewer letters and digits than this is not kept.
MIN_CHARS = 6
#: Values kept per session; one more overflows it (fail-closed).
MAX_VALUES = 256
#: A kept value (its compact form) is cut to this many bytes of UTF-8, whole characters.
MAX_VALUE_BYTES = 512
#: Buckets that remember (by a hash of the trace id) that an evicted session lived there.
FORGOTTEN_BUCKETS = 4096


def _bucket(trace_id: str) -> int:
    digest = hashlib.blake2b(trace_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % FORGOTTEN_BUCKETS


def compact(text: str) -> str:
    """The letters and digits of ``text``, NFKC and case-folded, nothing else."""
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


_FORGOTTEN = "a session whose confidential values may have been forgotten"
_DROPPED = "more confidential values than the session keeps"


@dataclass
class _Session:
    values: dict[str, str] = field(default_factory=dict)
    #: Why every call carries a secret (:data:`_DROPPED`, :data:`_FORGOTTEN`), or "".
    refused: str = ""


def leaves(value: Any) -> list[Any]:
    """Every string key of a table and every value that is neither a table nor a list, in
    ``value`` at any depth (the one walk of arguments: :func:`_texts` here, and the sink
    gate's content strings in :mod:`fak_core.sinks`)."""
    out: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            out.extend(k for k in v if type(k) is str)
            stack.extend(v.values())
        elif type(v) is list:
            stack.extend(v)
        else:
            out.append(v)
    return out


def _texts(value: Any) -> list[str]:
    """Every string and number in ``value`` at any depth (table keys included), a number
    as its ``repr``."""
    return [
        v if type(v) is str else repr(v)
        for v in leaves(value)
        if type(v) is str or type(v) is int or type(v) is float
    ]


@nonblocking
class ConfidentialStore:
    """Per-session confidential values, bounded in bytes per value, in count per session
    and in sessions."""

    def __init__(self, max_sessions: int = 65536) -> None:
        if max_sessions < 1:
            raise ValueError("max_sessions must be positive")
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._forgotten = bytearray(FORGOTTEN_BUCKETS)
        self._lock = threading.Lock()

    def record(self, trace_id: str, values: list[str], origin: str, whole: bool = True) -> None:
        """Keep ``values`` (from ``origin``) as the session's confidential values; ``whole``
        is False when they may not be all of them (the reading stopped at a bound), and
        the session overflows as if it had dropped one."""
        kept: dict[str, None] = {}
        for value in values:
            c = compact(value)
            if len(c) >= MIN_CHARS:
                kept[c.encode("utf-8")[:MAX_VALUE_BYTES].decode("utf-8", "ignore")] = None
        if whole and not kept:
            return
        with self._lock:
            s = self._sessions.get(trace_id)
            if s is None:
                # one created in a marked bucket may be one that was forgotten
                marked = self._forgotten[_bucket(trace_id)]
                s = self._sessions[trace_id] = _Session(refused=_FORGOTTEN if marked else "")
                while len(self._sessions) > self.max_sessions:
                    gone, _ = self._sessions.popitem(last=False)
                    self._forgotten[_bucket(gone)] = 1
            self._sessions.move_to_end(trace_id)
            fresh = [c for c in kept if c not in s.values]
            room = MAX_VALUES - len(s.values)
            for c in fresh[:room]:
                s.values[c] = origin
            if len(fresh) > room or not whole:
                s.refused = _DROPPED

    def reset(self, trace_id: str) -> None:
        """Forget the session's values (its bucket stays marked if it was)."""
        with self._lock:
            self._sessions.pop(trace_id, None)

    def carried(self, trace_id: str, args: Any) -> tuple[str, str] | None:
        """``(pointer, origin)`` of the first argument carrying a confidential value of the
        session (``pointer`` is the top-level argument, ``""`` for the whole), or None."""
        s = self._sessions.get(trace_id)
        if s is None:
            return ("", _FORGOTTEN) if self._forgotten[_bucket(trace_id)] else None
        if s.refused:
            return ("", s.refused)
        values = tuple(s.values.items())
        if type(args) is dict:
            parts = [
                ("/" + k.replace("~", "~0").replace("/", "~1"), [k, v]) for k, v in args.items()
            ]
        else:
            parts = [("", args)]
        for pointer, value in parts:
            for text in _texts(value):
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
