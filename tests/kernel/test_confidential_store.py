"""The confidential store (C4.10) against a model written from its documentation.

The oracle never calls the code under test. Every value is spelt from a hand-written
table of spellings whose compact form (NFKC, case-folded, letters and digits only) is
known by construction: a fullwidth or mathematical bold Q is ``q``, ``ß`` is ``ss``, a
final sigma is a sigma, a Hangul syllable written as its three jamo is the syllable,
``③`` is ``3``; the canonical letters take one to four bytes of UTF-8 (``q``, ``ж``,
``中``, ``𐐨``). Separators have no letters or digits, and the filler words use letters
``a``-``p``, which no secret holds, so a call's compact form is the concatenation of its
pieces' known ones. The model keeps the documented state (sessions least recently used
first, each one's kept values cut to :data:`MAX_VALUE_BYTES` bytes, why a session
refuses every call, the trace ids evicted) and answers ``carried`` from it; the trace ids
come from a pool whose forgotten buckets are distinct, so a bucket is marked exactly
when its own id was evicted.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core.confidential import (
    MAX_VALUE_BYTES,
    MAX_VALUES,
    MIN_CHARS,
    ConfidentialStore,
    _bucket,
)

#: canonical letter or digit -> spellings whose compact form is exactly it
SPELLINGS: dict[str, tuple[str, ...]] = {
    "q": ("q", "Q", "\uff31", "\uff51", "\U0001d410"),  # fullwidth, mathematical bold
    "r": ("r", "R", "\uff32"),
    "s": ("s", "S", "\u017f"),  # long s
    "z": ("z", "Z", "\uff3a", "\U0001d433"),
    "3": ("3", "\uff13", "\u00b3", "\u2462", "\U0001d7d1"),  # fullwidth, superscript, circled
    "7": ("7", "\uff17", "\u2466"),
    "0": ("0", "\uff10", "\u2070"),
    "ж": ("ж", "Ж"),
    "\u03c3": ("\u03c3", "\u03a3", "\u03c2"),  # sigma; a final sigma case-folds to it
    "中": ("中",),
    "한": ("한", "\u1112\u1161\u11ab"),  # the syllable, or its jamo (NFKC composes them)
    "𐐨": ("𐐨", "𐐀"),  # Deseret, four bytes of UTF-8
}
#: spellings of two canonical characters in one
PAIRS: dict[str, tuple[str, ...]] = {"ss": ("ß", "SS", "ẞ")}
CANON = sorted(SPELLINGS)
SEPARATORS = ("", " ", "-", ".", "/", " - ", "\u00a0", "_", "\t", "\u200b", "·")
ORIGINS = ("profile", "bank", "travel")

#: trace ids whose forgotten buckets are all distinct (so a marked bucket is its own id's)
POOL: list[str] = []
for _i in itertools.count():
    _t = ["s", "sess-ж", "\U0001f600", "t"][_i % 4] + str(_i)
    if _bucket(_t) not in {_bucket(p) for p in POOL}:
        POOL.append(_t)
    if len(POOL) == 6:
        break


def utf8(c: str) -> int:
    """Bytes of UTF-8 of one character, from its code point (RFC 3629)."""
    n = ord(c)
    return 1 if n < 0x80 else 2 if n < 0x800 else 3 if n < 0x10000 else 4


def cut(canon: str) -> str:
    """The longest prefix of ``canon`` of at most MAX_VALUE_BYTES bytes, whole characters."""
    out, used = [], 0
    for c in canon:
        used += utf8(c)
        if used > MAX_VALUE_BYTES:
            break
        out.append(c)
    return "".join(out)


@st.composite
def spelt(draw: st.DrawFn, min_size: int = 1, max_size: int = 12) -> tuple[str, str]:
    """``(text, canonical)``: canonical characters, each spelt one of its ways, with
    separators between some of them."""
    units = draw(
        st.lists(st.sampled_from(CANON + list(PAIRS)), min_size=min_size, max_size=max_size)
    )
    raw, canon = [], []
    for u in units:
        raw.append(draw(st.sampled_from((SPELLINGS | PAIRS)[u])))
        raw.append(draw(st.sampled_from(SEPARATORS)))
        canon.append(u)
    return "".join(raw), "".join(canon)


filler = st.text(st.sampled_from("abcdefghijklmnopABCDEFGHIJKLMNOP"), min_size=1, max_size=5)


@dataclass
class Model:
    max_sessions: int
    sessions: OrderedDict[str, dict[str, str]] = field(default_factory=OrderedDict)
    #: why a kept session carries a secret on every call: "forgotten" or "dropped"
    refused: dict[str, str] = field(default_factory=dict)
    evicted: set[str] = field(default_factory=set)

    def record(self, tid: str, canons: list[str], origin: str, whole: bool) -> None:
        kept = list(dict.fromkeys(cut(c) for c in canons if len(c) >= MIN_CHARS))
        if not kept and whole:
            return
        if tid not in self.sessions:
            self.sessions[tid] = {}
            # created after its id was evicted: it may have held values that were forgotten
            self.refused[tid] = "forgotten" if tid in self.evicted else ""
            if len(self.sessions) > self.max_sessions:
                gone = next(iter(self.sessions))
                del self.sessions[gone]
                self.evicted.add(gone)
        self.sessions.move_to_end(tid)
        values = self.sessions[tid]
        for k in kept:
            if k in values:
                continue
            if len(values) == MAX_VALUES:
                self.refused[tid] = "dropped"
            else:
                values[k] = origin
        if not whole:  # values may have been missed: as if one was dropped
            self.refused[tid] = "dropped"

    def reset(self, tid: str) -> None:
        self.sessions.pop(tid, None)

    def carried(self, tid: str, parts: list[tuple[str, list[str]]]) -> tuple[str, set[str]] | None:
        """``(pointer, possible origins)`` or None; ``parts`` are the top-level arguments'
        pointers and the canonical forms of their texts."""
        if tid not in self.sessions:
            return ("", {"forgotten"}) if tid in self.evicted else None
        if self.refused[tid] == "forgotten":
            return ("", {"may have been forgotten"})
        if self.refused[tid] == "dropped":
            return ("", {"more confidential values than the session keeps"})
        for pointer, canons in parts:
            origins = {o for k, o in self.sessions[tid].items() for c in canons if k in c}
            if origins:
                return (pointer, origins)
        return None


def pointer_of(key: str) -> str:
    """RFC 6901: ``~`` is written ``~0`` and ``/`` is written ``~1``."""
    return "/" + "".join({"~": "~0", "/": "~1"}.get(c, c) for c in key)


@st.composite
def call_args(draw: st.DrawFn, secrets: list[str]) -> tuple[Any, list[tuple[str, list[str]]]]:
    """Arguments that embed some of ``secrets`` (canonical forms, or parts of them) spelt
    anew, at the top level, nested, as a key at any depth, or as the whole arguments,
    with the model's view: each top-level pointer with its texts' canonical forms."""

    def text() -> tuple[str, str]:
        if secrets and draw(st.booleans()):
            s = draw(st.sampled_from(secrets))
            i = draw(st.integers(0, len(s)))
            j = draw(st.integers(i, len(s)))
            piece = s[i:j] if draw(st.booleans()) else s  # a part, or the whole value
            raw = "".join(
                draw(st.sampled_from(SPELLINGS[c])) + draw(st.sampled_from(SEPARATORS))
                for c in piece
            )
            canon = piece
        else:
            raw, canon = draw(spelt(0, 8))
        a, b = draw(filler), draw(filler)
        return f"{a} {raw} {b}", a.lower() + canon + b.lower()

    shape = draw(st.sampled_from(["object", "list", "string"]))
    if shape == "string":
        raw, canon = text()
        return raw, [("", [canon])]
    if shape == "list":
        (r1, c1), (r2, c2) = text(), text()
        return [r1, {r2: 1}], [("", [c1, c2])]
    args: dict[str, Any] = {}
    parts: list[tuple[str, list[str]]] = []
    for _ in range(draw(st.integers(1, 4))):
        key_raw, key_canon = (
            text()
            if draw(st.booleans())
            else (draw(st.sampled_from(["to", "a/b", "~c", "d~/"])), "")
        )
        if key_raw in args:
            continue
        kind = draw(st.sampled_from(["plain", "nested", "key"]))
        r, c = text()
        value: Any = r if kind == "plain" else [{"n": [r]}] if kind == "nested" else {r: 2}
        args[key_raw] = value
        # a key's canonical form: its letters a-p lower-cased, or the spelt text's
        kc = key_canon or "".join(ch for ch in key_raw if ch.isalpha())
        parts.append((pointer_of(key_raw), [kc, c]))
    return args, parts


def agrees(got: tuple[str, str] | None, want: tuple[str, set[str]] | None) -> bool:
    if want is None or got is None:
        return got is want
    pointer, origins = want
    return got[0] == pointer and any(o in got[1] for o in origins)


def same_state(store: ConfidentialStore, model: Model) -> None:
    """The store keeps exactly the model's sessions, in order, and their values."""
    assert list(store._sessions) == list(model.sessions)
    assert len(store) == len(model.sessions)
    for tid, values in model.sessions.items():
        s = store._sessions[tid]
        assert s.values == values
        assert ("forgotten" in s.refused, "more" in s.refused) == (
            model.refused[tid] == "forgotten",
            model.refused[tid] == "dropped",
        )
        assert all(len(k.encode("utf-8")) <= MAX_VALUE_BYTES for k in s.values)


op = st.one_of(
    st.tuples(
        st.just("record"),
        st.sampled_from(POOL),
        st.lists(spelt(0, 10), max_size=4),
        st.sampled_from(ORIGINS),
        st.sampled_from([True, True, True, False]),
    ),
    st.tuples(st.just("bulk"), st.sampled_from(POOL), st.integers(0, MAX_VALUES + 2)),
    st.tuples(st.just("reset"), st.sampled_from(POOL)),
    st.tuples(st.just("check"), st.sampled_from(POOL)),
)


@pytest.mark.fak_theorem("C4.10")
@given(st.integers(1, 4), st.lists(op, min_size=1, max_size=25), st.data())
def test_the_store_agrees_with_its_model(
    room: int, ops: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    store, model = ConfidentialStore(max_sessions=room), Model(room)
    for o in ops:
        if o[0] == "record":
            _, tid, spellings, origin, whole = o
            store.record(tid, [r for r, _ in spellings], origin, whole)
            model.record(tid, [c for _, c in spellings], origin, whole)
        elif o[0] == "bulk":  # many values at once: the per-session bound
            _, tid, n = o
            canons = ["q" + "".join(CANON[int(d)] for d in f"{i:06d}") for i in range(n)]
            spellings = [" ".join(SPELLINGS[c][-1] for c in canon) for canon in canons]
            store.record(tid, spellings, "bulk")
            model.record(tid, canons, "bulk", True)
        elif o[0] == "reset":
            store.reset(o[1])
            model.reset(o[1])
        else:
            tid = o[1]
            secrets = list(model.sessions.get(tid, {}))
            args, parts = data.draw(call_args(secrets))
            got, want = store.carried(tid, args), model.carried(tid, parts)
            assert agrees(got, want), (args, got, want)
        same_state(store, model)
    for tid in POOL:  # every id answers as the model says, asked with nothing secret
        assert agrees(store.carried(tid, {"to": "abc"}), model.carried(tid, [("/to", ["abc"])]))


@pytest.mark.fak_theorem("C4.10")
def test_kept_values_are_cut_at_the_byte_bound_in_whole_characters() -> None:
    """Values whose compact form ends one under, at and over the byte bound, with a last
    character of one to four bytes: the kept value is the longest prefix that fits, it is
    carried by the whole value and by that prefix, and not by one character less."""
    for width, last in ((1, "z"), (2, "ж"), (3, "中"), (4, "𐐨")):
        for total in range(MAX_VALUE_BYTES - 5, MAX_VALUE_BYTES + 6):
            head = "7" * (total - width)
            canon = head + last
            spelling = "".join(SPELLINGS[c][-1] + " " for c in canon)
            store = ConfidentialStore()
            store.record("s", [spelling], "profile")
            want = canon if total <= MAX_VALUE_BYTES else head[:MAX_VALUE_BYTES]
            assert list(store._sessions["s"].values) == [want], (width, total)
            assert store.carried("s", {"body": f"see {spelling}"}) == ("/body", "profile")
            assert store.carried("s", {"body": want}) == ("/body", "profile")
            assert store.carried("s", {"body": want[:-1]}) is None


@pytest.mark.fak_theorem("C4.10")
def test_the_whole_value_is_read_before_it_is_cut() -> None:
    """Letters and digits only after many separators, and a letter that composes with the
    combining mark after it (``z`` + U+0301 is ``ź``) where a cut of the raw text would
    fall: the value is still kept and still carried whole."""
    store = ConfidentialStore()
    store.record("s", [" " * 600 + "4237-4252-7456-2574"], "profile")
    assert store.carried("s", {"body": "card 4237 4252 7456 2574"}) == ("/body", "profile")
    composed = "q" * (MAX_VALUE_BYTES - 1) + "z\u0301" + "Q" * 10
    store.record("t", [composed], "profile")
    assert store.carried("t", {"body": composed}) == ("/body", "profile")
    # NFKC expands U+FDFA to 18 characters: the kept value is still bounded in bytes
    store.record("u", ["\ufdfa" * 512], "profile")
    assert all(len(k.encode("utf-8")) <= MAX_VALUE_BYTES for k in store._sessions["u"].values)
    assert store.carried("u", ["\ufdfa" * 40]) == ("", "profile")


@pytest.mark.fak_theorem("C4.10")
def test_values_at_the_minimum_length_and_empty_ones() -> None:
    """Five letters and digits are not kept, six are (counted after NFKC and case
    folding: three ``ß`` are ``ssssss``); an empty value or one of separators is not."""
    for spelling, canon in (
        ("ß ß ß", "ssssss"),
        ("Q-3-Ж-中-𐐀-7", "q3ж中𐐨7"),
        ("\uff31\uff32\u00b3\u2466\u2070", "qr370"),
        ("", ""),
        (" - / ", ""),
        ("q3z7r", "q3z7r"),
        ("q3z7r0", "q3z7r0"),
    ):
        store = ConfidentialStore()
        store.record("s", [spelling], "profile")
        kept = len(canon) >= MIN_CHARS
        assert ("s" in store._sessions) == kept, spelling
        assert (store.carried("s", {"body": f"x{canon}x"}) is not None) == kept, spelling


@pytest.mark.fak_theorem("C4.10")
def test_duplicates_do_not_stop_recording_and_the_bound_is_exact() -> None:
    """A value the session already holds (spelt otherwise) is skipped, the ones after it
    are kept; exactly MAX_VALUES distinct values fit, one more overflows."""
    store = ConfidentialStore()
    store.record("s", ["QQQ333", "q-q-q 3 3 3", "qqq³³³", "RRR777"], "profile")
    assert store.carried("s", {"body": "rrr777"}) == ("/body", "profile")
    for n in (MAX_VALUES - 1, MAX_VALUES, MAX_VALUES + 1):
        store = ConfidentialStore()
        values = [f"zz{i:06d}" for i in range(n)]
        store.record("s", values[: n // 2] + values[:3], "profile")  # duplicates too
        store.record("s", values[n // 2 :] + values[-3:], "bank")
        read = store.carried("s", {"body": "nothing here"})
        assert (read is not None) == (n > MAX_VALUES), n
        assert len(store._sessions["s"].values) == min(n, MAX_VALUES)
        if n <= MAX_VALUES:
            assert store.carried("s", {"body": values[-1]}) == ("/body", "bank")
            assert store.carried("s", {"body": values[0]}) == ("/body", "profile")


FORGOTTEN = ("", "a session whose confidential values may have been forgotten")


@pytest.mark.fak_theorem("C4.10")
def test_a_session_sharing_a_bucket_with_an_evicted_one_reads_as_forgotten() -> None:
    """Two ids in one bucket: once one is evicted, it carries a secret on every call, and
    so does the other once it is not kept or is recorded again; reset does not clear it.
    The one kept since before the eviction still reads its own values."""
    seen: dict[int, str] = {}
    for i in itertools.count():
        b = _bucket(f"id{i}")
        if b in seen:
            first, second = seen[b], f"id{i}"
            break
        seen[b] = f"id{i}"
    store = ConfidentialStore(max_sessions=2)
    store.record(second, ["RRR777"], "bank")
    store.record(first, ["QQQ333"], "profile")
    store.record("other", ["ZZZ000"], "travel")  # evicts second
    assert store.carried(second, {"body": "hello"}) == FORGOTTEN
    assert store.carried(first, {"body": "hello"}) is None  # kept all along
    assert store.carried(first, {"body": "qqq333"}) == ("/body", "profile")
    store.record(second, ["SSS777"], "bank")  # recorded again; evicts first
    for tid in (first, second):
        assert store.carried(tid, {"body": "hello"}) == FORGOTTEN
        store.reset(tid)
        assert store.carried(tid, {"body": "hello"}) == FORGOTTEN
    store.record("other", ["ZZZ777"], "bank")
    store.reset("other")  # a reset of a session never evicted reads clean again
    assert store.carried("other", {"body": "zzz777"}) is None


@pytest.mark.fak_theorem("C4.10")
def test_a_pointer_is_the_escaped_top_level_key_or_empty_for_the_whole() -> None:
    store = ConfidentialStore()
    store.record("s", ["QQQ333"], "profile")
    for key, pointer in (("a/b", "/a~1b"), ("~x", "/~0x"), ("~/", "/~0~1"), ("", "/")):
        assert store.carried("s", {"to": "x", key: ["qqq333"]}) == (pointer, "profile")
    assert store.carried("s", {"to": "x", "qqq 333": 1}) == ("/qqq 333", "profile")
    assert store.carried("s", ["a", {"b": "QQQ-333"}]) == ("", "profile")
    assert store.carried("s", "QQQ333") == ("", "profile")
    assert store.carried("s", 123) is None
