"""C4.9's bounds: which identifiers of a result are kept, and for how long.

The oracle is :mod:`tests.kernel.identmodel`, a model written from the theorem's words.
The bounds are brute-forced around every place the budget can run out: exactly at it,
one under, one over, and with just room for a later, cheaper value.
"""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fak_core import Kernel, Policy, Result, Status, ToolCall, ToolDecl, VerdictKind
from fak_core.grounding import GroundingStore
from fak_core.taint import Taint
from tests.kernel.identmodel import (
    MAX_CHARS,
    PER_RESULT,
    PER_VALUE,
    canon,
    kept,
    replay,
    utf8_len,
)

#: one, two, three and four UTF-8 bytes, and a lone surrogate (three, as JSON carries it)
LETTERS = "az\u00e9\u0436\u4e2d\U0001f600\ud800"

letters = st.text(st.sampled_from(LETTERS), min_size=1, max_size=9)
spaced = st.builds(
    lambda words, sep, pad: pad + sep.join(words) + pad,
    st.lists(letters, min_size=1, max_size=3),
    st.sampled_from([" ", "  ", "\t", " \n "]),
    st.sampled_from(["", " "]),
)
#: values with no canonical form: empty, blank, one character too long
formless = st.sampled_from(["", " ", "\t\n", "y" * (MAX_CHARS + 1)])
value = st.one_of(spaced, spaced, formless, st.just("y" * MAX_CHARS))


def _bounds(values: list[str]) -> set[int]:
    """Trusted bounds at every edge of ``values``' budget: the room left equal to the
    cost of the first k distinct forms, one less and one more, and the first k's cost plus
    that of a later form (room for it after a dearer one did not fit); each quarter with
    every remainder (the bound is divided by four, rounding down)."""
    forms = list(dict.fromkeys(c for c in map(canon, values) if c is not None))
    costs = [utf8_len(c) + PER_VALUE for c in forms]
    sums = [sum(costs[:k]) for k in range(len(costs) + 1)]
    rooms = {s + d for s in sums for d in (-1, 0, 1)}
    rooms |= {sums[k] + c for k in range(len(costs)) for c in costs[k + 1 :]}
    return {4 * (room + PER_RESULT) + r for room in rooms if room >= -1 for r in (0, 3)}


def _respelt(values: list[str], picks: list[tuple[int, bool]]) -> list[str]:
    """``values`` with some repeated later, as written or in upper case (one form)."""
    out = list(values)
    for i, upper in picks:
        if out:
            v = out[i % len(out)]
            out.insert(i % (len(out) + 1), v.upper() if upper else v)
    return out


@pytest.mark.fak_theorem("C4.9")
@given(
    st.lists(value, max_size=10),
    st.lists(st.tuples(st.integers(0, 20), st.booleans()), max_size=4),
)
@example(["aa", "\ud800\ud800 z", "\U0001f600\u4e2d"], [])  # surrogates and 4-byte letters
@example(["zzzzzzzzz zzzzzzzzz", "a"], [])  # a dear value stops the result; a cheap one after it
@example(["", " ", "a", "a", "A", "\u00e9"], [])  # no form, then repeats cost nothing
def test_a_result_keeps_its_identifiers_in_order_within_a_quarter_of_the_bound(
    values: list[str], picks: list[tuple[int, bool]]
) -> None:
    values = _respelt(values, picks)
    for trusted_bytes in sorted(_bounds(values)):
        store = GroundingStore(trusted_bytes=trusted_bytes)
        store.record_identifiers("s", values, "ids:inbox")
        forms = kept(values, trusted_bytes)
        for v in values:
            want = canon(v) in forms
            assert store.grounded("s", v) is want, (trusted_bytes, v, forms)
            assert store.grounded("s", v.upper()) is want, (trusted_bytes, v, forms)


NAMES = ["ann", "bo lee", "cy", "dee dee", "ed", "flo ng"]


@pytest.mark.fak_theorem("C4.9")
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ids:inbox", "ids:files"]),
            st.lists(st.sampled_from(NAMES), max_size=5),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(60, 240),
)
def test_identifiers_leave_the_session_oldest_first_and_then_ground_nothing(
    results: list[tuple[str, list[str]]], quarter: int
) -> None:
    # ASCII values: a form's cost is its length plus 48 and the chunk's 96 more
    trusted_bytes = 4 * (PER_RESULT + quarter)
    store = GroundingStore(trusted_bytes=trusted_bytes)
    everything = sorted({v for _, vs in results for v in vs})
    # the values are also in untrusted content all along: that grounds nothing
    store.record_untrusted("s", " ".join(everything), "tool")
    for (origin, values), held in zip(results, replay(results, trusted_bytes), strict=True):
        store.record_identifiers("s", values, origin)
        for v in everything:
            assert store.grounded("s", v) is (v in held), (v, held)
            for word in v.split(" ")[1:] if " " in v else ():
                assert store.grounded("s", word) is (word in held), (word, held)


#: separators a digest of a set of values might join them with
SEPARATORS = ["\x00", ":", "\n", " ", ",", "|", ";", "", "\x00ident:", ":ident:", "\nident:"]


@pytest.mark.fak_theorem("C4.9")
@given(st.lists(st.sampled_from([*NAMES[:3], "x:y"]), min_size=1, max_size=3, unique=True))
def test_a_result_whose_identifier_spells_others_joined_still_grounds_it(
    first: list[str],
) -> None:
    # a later result of the same tool holds one value: the first result's values joined
    # (with a kind prefixed or not); the session must not take it for the same result
    for sep in SEPARATORS:
        spelt = {sep.join(vs) for vs in (first, sorted(first))}
        for joined in spelt | {sep.join("ident:" + v for v in vs) for vs in (first, sorted(first))}:
            if canon(joined) in (None, *first):
                continue
            store = GroundingStore()
            store.record_identifiers("s", first, "ids:inbox")
            store.record_identifiers("s", [joined], "ids:inbox")
            assert store.grounded("s", joined), (sep, joined)
            assert all(store.grounded("s", v) for v in first)


V2 = "fak-policy/v2"


def _kernel(trusted_bytes: int) -> Kernel:
    policy = Policy(
        version=V2,
        allow=("inbox", "send"),
        sources={"inbox": "untrusted"},
        tools={
            "inbox": ToolDecl("NONE", identifiers=("/*/sender",)),
            "send": ToolDecl("EGRESS", ("/to",)),
        },
    )
    return Kernel(policy, grounding=GroundingStore(trusted_bytes=trusted_bytes))


@pytest.mark.fak_theorem("C4.9")
@given(st.integers(1, 60), st.integers(12, 120))
def test_a_flood_of_identifiers_never_pushes_out_the_users_words_that_fit(
    count: int, notes: int
) -> None:
    senders = [f"user{i}@bulk{i}.example" for i in range(count)]
    payload = json.dumps([{"sender": s} for s in senders])
    assert len(payload) < 4096  # under the screen's page-out size: the result is read
    user = "send it to zed@home.example, " + " ".join(f"note{i}" for i in range(notes))
    probe = GroundingStore()  # the user's words' cost, as the store counts a text (C4.6)
    probe.record_trusted("u", user)
    words = probe.stats()["grounding_bytes"] - PER_RESULT - len("u")

    @functools.cache
    def quarter_chunk(quarter: int) -> int:
        forms = kept(senders, 4 * quarter)
        return PER_RESULT + sum(len(c) + PER_VALUE for c in forms) if forms else 0

    def chunk(trusted_bytes: int) -> int:  # the model's cost of the result's identifiers
        return quarter_chunk(trusted_bytes // 4)

    # walk the bound up to where the words and the identifiers overfill it by one byte,
    # fill it exactly, and leave one byte (its quarter, the identifiers' room, grows too)
    bound = min(4 * words // 3, words + chunk(1 << 20)) - 300
    assert bound - chunk(bound) - words < -1
    edges: dict[int, int] = {}
    while len(edges) < 3:
        over = bound - chunk(bound) - words
        if over in (-1, 0, 1):
            edges.setdefault(over, bound)
        bound += 1
    for trusted_bytes in (edges[-1], edges[0], edges[1]):
        assert chunk(trusted_bytes) and len(user) <= trusted_bytes // 4  # the text is whole
        k = _kernel(trusted_bytes)
        k.record_trusted("s", user)
        call = ToolCall("inbox", "{}", "s")
        assert k.decide(call).kind == VerdictKind.ALLOW
        k.admit(call, Result(Status.OK, payload, taint=Taint.TRUSTED))
        assert k.taint("s") == Taint.TAINTED

        def sent(to: str, k: Kernel = k) -> bool:
            call = ToolCall("send", json.dumps({"to": to}), "s")
            return k.decide(call).kind == VerdictKind.ALLOW

        fits = words + chunk(trusted_bytes) <= trusted_bytes
        assert sent("zed@home.example") is fits, (trusted_bytes, words)
        forms = kept(senders, trusted_bytes)
        # every sender kept, and the first two past the budget (a refusal rescans the
        # untrusted result to name it: the rest are left out for speed)
        for s in senders[: len(forms) + 2]:
            assert sent(s) is (s in forms), (s, trusted_bytes)
