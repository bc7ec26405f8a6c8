"""The grounding store's recorders at their byte bounds (C4.6): fixed scripts of trusted
texts (one at a time and in turns, new and already held), untrusted texts and resets on
four sessions, replayed under every total that sits one byte under, at and one byte over
what the store holds after some step of the script (and under untrusted bounds likewise),
so every eviction happens at its exact edge. After every step the store must agree with
the model of ``test_grounding_store_model`` (the theorem's accounting written out): the
words each session grounds, the first untrusted origin of each word, the sessions held,
their bytes and the evictions. Deterministic and small, so a mutant's re-run is short.
"""

from __future__ import annotations

from typing import Any

import pytest

from fak_core.grounding import GroundingStore, _canonical
from tests.kernel.test_grounding_store_model import VOCAB, Model, _apply

TRACES = ["a", "bb", "ccc", "dddd"]
Step = tuple[str, str, Any]

# every session is made, touched by a text it already holds (alone and in a turn), by an
# untrusted text (one holds a lone surrogate: 3 bytes), reset and made again; an empty
# turn records nothing, so it does not make its session recent
SESSIONS: list[Step] = [
    ("trusted", "a", ("user", "alpha beta")),
    ("untrusted", "bb", ("lookup", "gamma s\udc80")),
    ("trusted", "ccc", ("user", "delta")),
    ("trusted", "a", ("user", "alpha beta")),
    ("many", "bb", [("user", "日本 x"), ("user", "日本 x"), ("system", "beta")]),
    ("trusted", "dddd", ("system", "çédille")),
    ("many", "bb", []),
    ("many", "ccc", [("user", "delta")]),
    ("untrusted", "a", ("tool:lookup", "ωmega ñu x")),
    ("trusted", "dddd", ("user", "gamma")),
    ("reset", "bb", None),
    ("reset", "bb", None),
    ("untrusted", "bb", ("lookup", "alpha")),
    ("trusted", "ccc", ("user", "ñu ωmega")),
    ("reset", "a", None),
    ("trusted", "a", ("user", "alpha beta")),
]

# one session's untrusted texts leave oldest first; a word is named by its first holder
UNTRUSTED: list[Step] = [
    ("untrusted", "a", ("one", "alpha beta")),
    ("untrusted", "a", ("two", "beta gamma s\udc80")),
    ("trusted", "a", ("user", "x")),
    ("untrusted", "a", ("three", "gamma delta")),
    ("untrusted", "bb", ("four", "alpha")),
    ("untrusted", "a", ("five", "delta ωmega")),
    ("untrusted", "a", ("six", "")),
]


def _held_after_each_step(
    script: list[Step], trusted: int, untrusted: int
) -> list[tuple[int, int]]:
    """The model's (bytes held, untrusted bytes of trace "a") after each step, unbounded
    in total."""
    model = Model(trusted, untrusted, 10**9)
    out = []
    for step in script:
        _model_only(model, step)
        s = model.sessions.get("a")
        out.append((model.bytes, 0 if s is None else sum(u[2] for u in s.untrusted)))
    return out


def _model_only(model: Model, step: Step) -> None:
    kind, trace, arg = step
    if kind == "trusted":
        model.trusted(trace, arg[1], arg[0])
    elif kind == "many":
        model.many(trace, arg)
    elif kind == "untrusted":
        model.untrusted(trace, arg[1], arg[0])
    else:
        model.reset(trace)


def _edges(values: list[int]) -> list[int]:
    return sorted({v + d for v in values for d in (-1, 0, 1) if v + d > 0})


def _replay(script: list[Step], trusted: int, untrusted: int, total: int) -> None:
    _canonical.cache_clear()  # a canonical form the real code cached must not answer
    store = GroundingStore(trusted, untrusted, total)
    model = Model(trusted, untrusted, total)
    for n, step in enumerate(script):
        _apply(store, model, step)
        where = (total, untrusted, n)
        stats = store.stats()
        assert stats["grounding_sessions"] == len(model.sessions) == len(store), where
        assert stats["grounding_bytes"] == model.bytes, where
        assert stats["grounding_evicted"] == model.evicted, where
        for trace in TRACES:
            for word in VOCAB:
                assert store.grounded(trace, word) == model.grounds(trace, word), (where, word)
                assert store.origin_of(trace, word) == model.origin(trace, word), (where, word)


@pytest.mark.fak_theorem("C4.6")
def test_sessions_leave_least_recently_recorded_first_at_the_exact_total() -> None:
    held = [b for b, _ in _held_after_each_step(SESSIONS, 4000, 4000)]
    for total in [1, *_edges(held)]:
        _replay(SESSIONS, 4000, 4000, total)


@pytest.mark.fak_theorem("C4.6")
def test_untrusted_texts_leave_oldest_first_at_the_exact_bound() -> None:
    kept = [u for _, u in _held_after_each_step(UNTRUSTED, 4000, 10**6)]
    for bound in [1, *_edges(kept)]:
        _replay(UNTRUSTED, 4000, bound, 10**6)


# 25 "alpha" and a space are a quarter of 600 characters: a text and its cut one word on
A = "alpha " * 25
TWENTY = {w: (w + " ") * 20 for w in ("gamma", "delta", "beta", "x")}  # 270 bytes each
# a turn whose texts push out one held when it started, and one that came earlier in it,
# before each comes again (cut alike): neither is recorded again in that turn
TURNS: list[Step] = [
    ("trusted", "a", ("user", TWENTY["delta"])),
    (
        "many",
        "a",
        [
            ("user", A + "beta"),
            ("user", TWENTY["gamma"]),
            ("system", TWENTY["x"]),
            ("user", A + "gamma"),
            ("user", TWENTY["delta"]),
        ],
    ),
    ("many", "a", [("user", TWENTY["beta"]), ("user", A), ("user", A + "delta")]),
    ("many", "a", [("system", TWENTY["x"]), ("system", TWENTY["x"])]),
]


@pytest.mark.fak_theorem("C4.6")
@pytest.mark.parametrize("bound", [599, 600, 601, 840, 1200])
def test_a_turn_records_each_text_once_and_none_it_held_when_it_started(bound: int) -> None:
    _replay(TURNS, bound, 4000, 10**6)
