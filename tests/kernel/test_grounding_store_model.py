"""The grounding store against a model (C4.6): generated sequences of trusted texts (one
at a time and in proxied turns), untrusted texts and resets on three sessions, under
bounds small enough that texts and whole sessions leave. After every step the model says
which words each session's trusted context grounds, which untrusted text a word is first
found in, how many sessions are held, the bytes they cost and how many were evicted.

The model is the theorem's accounting written out, for texts of bare lower-case words (no
punctuation, no dots, nothing IBAN-shaped, some of them not ASCII), whose canonical forms
are the words themselves: a trusted text costs the UTF-8 bytes of its words joined and
padded by one space, each distinct word's bytes plus 48, and 96; an untrusted text its
UTF-8 bytes, its origin's characters and 96; a session 96 and its id's characters more.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy, ToolCall, ToolDecl, VerdictKind
from fak_core.grounding import GroundingStore, _canonical
from fak_core.taint import Taint


@pytest.fixture(autouse=True)
def _fresh_canonical_forms() -> None:
    """A canonical form the real code cached must not answer for a mutant."""
    _canonical.cache_clear()


# a lone surrogate reaches the store from JSON text ("\udc80"): it counts 3 bytes
VOCAB = ["alpha", "beta", "gamma", "delta", "çédille", "ñu", "ωmega", "日本", "x", "s\udc80"]
TRACES = ["a", "bb", "ccc"]
ORIGINS = ["user", "system", "tool:lookup", "user\0x", "lookup"]


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _chunk_cost(words: list[str]) -> int:
    padded = " " + " ".join(words) + " "
    return _bytes(padded) + sum(_bytes(w) + 48 for w in set(words)) + 96


@dataclass
class _Session:
    trusted: list[tuple[str, str, list[str], int]] = field(default_factory=list)
    untrusted: list[tuple[str, str, int]] = field(default_factory=list)

    def cost(self) -> int:
        return sum(c[3] for c in self.trusted) + sum(u[2] for u in self.untrusted) + 96


class Model:
    def __init__(self, trusted: int, untrusted: int, total: int) -> None:
        self.tb, self.ub, self.total = trusted, untrusted, total
        self.sessions: OrderedDict[str, _Session] = OrderedDict()
        self.bytes = 0
        self.evicted = 0

    def _session(self, trace: str) -> _Session:
        if trace not in self.sessions:
            self.sessions[trace] = _Session()
            self.bytes += 96 + len(trace)
        self.sessions.move_to_end(trace)
        return self.sessions[trace]

    def _held(self, trace: str) -> set[tuple[str, str]]:
        s = self.sessions.get(trace)
        return set() if s is None else {(c[0], c[1]) for c in s.trusted}

    def _bound(self, keep: str) -> None:
        while self.bytes > self.total and len(self.sessions) > 1:
            old = next(iter(self.sessions))
            if old == keep:
                self.sessions.move_to_end(old)
                continue
            self.bytes -= self.sessions.pop(old).cost() + len(old)
            self.evicted += 1

    def trusted(self, trace: str, text: str, origin: str) -> None:
        text = text[: self.tb // 4]
        if (origin, text) in self._held(trace):
            self.sessions.move_to_end(trace)  # seen: the session was used now
            return
        s = self._session(trace)
        words = text.split()
        cost = _chunk_cost(words)
        s.trusted.append((origin, text, words, cost))
        self.bytes += cost
        while sum(c[3] for c in s.trusted) > self.tb and s.trusted:
            self.bytes -= s.trusted.pop(0)[3]
        self._bound(trace)

    def many(self, trace: str, items: list[tuple[str, str]]) -> None:
        held, done = self._held(trace), set()
        for origin, text in items:
            key = (origin, text[: self.tb // 4])
            if key in done or key in held:
                continue
            done.add(key)
            self.trusted(trace, text, origin)
        if held and len(done) < len(items) and trace in self.sessions:
            self.sessions.move_to_end(trace)

    def untrusted(self, trace: str, text: str, origin: str) -> None:
        text = text[: self.ub]
        s = self._session(trace)
        cost = _bytes(text) + len(origin) + 96
        s.untrusted.append((origin, text, cost))
        self.bytes += cost
        while sum(u[2] for u in s.untrusted) > self.ub and s.untrusted:
            self.bytes -= s.untrusted.pop(0)[2]
        self._bound(trace)

    def reset(self, trace: str) -> None:
        s = self.sessions.pop(trace, None)
        if s is not None:
            self.bytes -= s.cost() + len(trace)

    def grounds(self, trace: str, word: str) -> bool:
        s = self.sessions.get(trace)
        return s is not None and any(word in c[2] for c in s.trusted)

    def origin(self, trace: str, word: str) -> str | None:
        s = self.sessions.get(trace)
        found = (u[0] for u in (s.untrusted if s else []) if word in u[1].split())
        return next(found, None)


# a text may begin with "x\0": then ("user\0x", t) and ("user", "x\0" + t) are two texts
texts = st.tuples(st.sampled_from(["", "x\0"]), st.lists(st.sampled_from(VOCAB), max_size=14)).map(
    lambda t: t[0] + " ".join(t[1])
)
item = st.tuples(st.sampled_from(ORIGINS), texts)
op = st.one_of(
    st.tuples(st.just("trusted"), st.sampled_from(TRACES), item),
    st.tuples(st.just("many"), st.sampled_from(TRACES), st.lists(item, max_size=4)),
    st.tuples(st.just("untrusted"), st.sampled_from(TRACES), item),
    st.tuples(st.just("reset"), st.sampled_from(TRACES), st.none()),
)


def _apply(store: GroundingStore, model: Model, step: tuple[str, str, Any]) -> None:
    kind, trace, arg = step
    if kind == "trusted":
        store.record_trusted(trace, arg[1], arg[0])
        model.trusted(trace, arg[1], arg[0])
    elif kind == "many":
        store.record_trusted_many(trace, arg)
        model.many(trace, arg)
    elif kind == "untrusted":
        store.record_untrusted(trace, arg[1], arg[0])
        model.untrusted(trace, arg[1], arg[0])
    else:
        store.reset(trace)
        model.reset(trace)


@pytest.mark.fak_theorem("C4.6")
@settings(max_examples=150)
@given(
    st.integers(200, 1400),
    st.integers(100, 600),
    st.integers(300, 3000),
    st.lists(op, max_size=30),
)
def test_the_store_keeps_what_the_model_keeps(
    trusted: int, untrusted: int, total: int, steps: list[tuple[str, str, Any]]
) -> None:
    store = GroundingStore(trusted, untrusted, total)
    model = Model(trusted, untrusted, total)
    for step in steps:
        _apply(store, model, step)
        for trace in TRACES:
            for word in VOCAB:
                assert store.grounded(trace, word) == model.grounds(trace, word), (trace, word)
                assert store.origin_of(trace, word) == model.origin(trace, word), (trace, word)
        stats = store.stats()
        assert stats["grounding_sessions"] == len(model.sessions)
        assert stats["grounding_bytes"] == model.bytes
        assert stats["grounding_evicted"] == model.evicted
        assert len(store) == len(model.sessions)


@pytest.mark.fak_theorem("C4.6")
# every case of the small domain, not a sample: only some pairs of a tool's name and a
# label collide with what a mislabelled result would be, and a sample can miss them all
# (the host's labels are kept under "host:", which a tool's name may also start with)
@pytest.mark.parametrize("tool", ["lookup", "host:lookup", "tool:lookup"])
@pytest.mark.parametrize("before", [0, 1, 2])
@pytest.mark.parametrize("many", [False, True])
@pytest.mark.parametrize(
    "label", ["tool:lookup", "tool:lookup\0", "host:tool:lookup", "lookup", "user", ""]
)
def test_no_text_the_host_records_stands_for_a_trusted_tools_result(
    label: str, many: bool, before: int, tool: str
) -> None:
    """The host records the text a trusted tool will return, under a label spelt like the
    kernel's own for that tool's results; the tool's result is still a record of its own,
    kept from its admission. Every text costs the same and the bound holds three: the
    oracle is a queue of three."""
    text = "zebra " * 150
    fill = [(f"fill{i}x " * 128) for i in range(6)]
    k = Kernel(
        Policy(
            version="fak-policy/v2",
            allow=(tool, "send"),
            sources={tool: "trusted_local"},
            tools={"send": ToolDecl("EGRESS", ("/to",))},
        ),
        grounding=GroundingStore(trusted_bytes=3 * 1200, max_bytes=10**6),
    )
    k.register_tool(tool, lambda args: text, source="trusted_local")
    queue: list[str] = []

    def host(what: str, origin: str) -> None:
        if many:
            k.record_trusted_many("s", [(origin, what)])
        else:
            k.record_trusted("s", what, origin)
        queue.append(what)
        del queue[:-3]

    host(text, label)
    for i in range(before):
        host(fill[i], "user")
    admitted, _ = k.syscall(ToolCall(tool, "{}", "s"))
    assert admitted.taint == Taint.TRUSTED
    queue.append(text)
    del queue[:-3]
    for i in range(before, before + 3):
        host(fill[i], "user")
        k.ledger.raise_to("s", Taint.TAINTED)
        v = k.decide(ToolCall("send", '{"to": "zebra"}', "s"))
        assert (v.kind == VerdictKind.ALLOW) == (text in queue), (i, queue.count(text), v)


# two (origin, text) pairs that a separator between them would join into one string
SPLITS = [
    (("user\0x", "alpha"), ("user", "x\0alpha")),
    (("user", "x\0alpha"), ("user\0x", "alpha")),
    (("tool:lookup\0", "beta"), ("tool:lookup", "\0beta")),
    (("", "\0gamma"), ("\0", "gamma")),
]


@pytest.mark.fak_theorem("C4.6")
@pytest.mark.parametrize(("first", "second"), SPLITS)
def test_two_texts_are_two_records_however_their_labels_split(
    first: tuple[str, str], second: tuple[str, str]
) -> None:
    store = GroundingStore(1000, 500, 10**6)
    model = Model(1000, 500, 10**6)
    for origin, text in (first, second, first):
        _apply(store, model, ("trusted", "a", (origin, text)))
    assert len(model.sessions["a"].trusted) == 2
    assert store.stats()["grounding_bytes"] == model.bytes
    for word in [*VOCAB, "x\0alpha", "\0beta", "\0gamma"]:
        assert store.grounded("a", word) == model.grounds("a", word), word


@pytest.mark.fak_theorem("C4.6")
@pytest.mark.parametrize("bound", [240, 400, 1000])
@pytest.mark.parametrize("many", [False, True])
def test_a_text_is_cut_to_a_quarter_of_the_bound_before_it_is_read(bound: int, many: bool) -> None:
    """Two texts that agree up to the cut are one text; one character inside it tells
    them apart. Each pair is recorded in one call (a turn) or one at a time."""
    cut = bound // 4
    base = ("alpha " * bound)[: cut - 1]
    for at in range(cut - 6, cut + 6):
        store = GroundingStore(bound, 100, 10**6)
        model = Model(bound, 100, 10**6)
        first = base[:at] + " " * (at >= len(base)) + "beta gamma delta"
        second = first[:at] + "\u00f1u " + first[at:]
        items = [("user", first), ("user", second)]
        if many:
            _apply(store, model, ("many", "a", items))
        else:
            for item in items:
                _apply(store, model, ("trusted", "a", item))
        assert store.stats()["grounding_bytes"] == model.bytes, at
        for word in VOCAB:
            assert store.grounded("a", word) == model.grounds("a", word), (at, word)


@pytest.mark.fak_theorem("C4.6")
@pytest.mark.parametrize("declared", [None, "destinations", "content", "neither"])
def test_results_are_kept_only_while_a_declared_tool_reads_them(declared: str | None) -> None:
    """Only a declared destination or content argument reads the store: without one, no
    result is kept (and the proxies capture no words); with one, each result is."""
    decl = {
        None: None,
        "destinations": ToolDecl("EGRESS", ("/to",)),
        "content": ToolDecl("EGRESS", (), content=("/body",)),
        "neither": ToolDecl("EGRESS"),
    }[declared]
    tools = {} if decl is None else {"send": decl}
    version = "fak-policy/v1" if decl is None else "fak-policy/v2"
    k = Kernel(Policy(version=version, allow=("send", "fetch"), tools=tools))
    k.register_tool("fetch", lambda args: "see alpha.example")
    k.syscall(ToolCall("fetch", "{}", "s"))
    reads = declared in ("destinations", "content")
    assert k.grounds_destinations is reads
    assert k.grounding.stats()["grounding_sessions"] == int(reads)
    swapped = Policy(
        version="fak-policy/v2",
        allow=("send", "fetch"),
        tools={"send": decl or ToolDecl("EGRESS", ("/to",))},
    )
    k.set_policy(swapped)
    k.syscall(ToolCall("fetch", "{}", "t"))
    now = bool(swapped.tools["send"].destinations or swapped.tools["send"].content)
    assert k.grounds_destinations is now
    assert k.grounding.stats()["grounding_sessions"] == int(reads) + int(now)


@pytest.mark.fak_theorem("C4.6")
@pytest.mark.parametrize("slack", [-1, 0, 1])
def test_the_trusted_bound_holds_exactly_and_a_forgotten_text_is_recorded_again(
    slack: int,
) -> None:
    """Texts of 20 five-letter words cost 6 * 20 + 1 + 53 + 96 = 270 each: a bound of
    exactly two holds both (one byte less holds one); a text recorded again after it left
    is a record again."""
    one, two, three = ("alpha " * 20, "gamma " * 20, "delta " * 20)
    assert _chunk_cost(one.split()) == 270
    bound = 540 + slack
    store = GroundingStore(bound, 100, 10**6)
    model = Model(bound, 100, 10**6)
    for text in (one, two, three, one, two):
        _apply(store, model, ("trusted", "a", ("user", text)))
        assert store.stats()["grounding_bytes"] == model.bytes
        for word in VOCAB:
            assert store.grounded("a", word) == model.grounds("a", word), (text, word)


@pytest.mark.fak_theorem("C4.6")
def test_one_text_under_two_host_labels_is_two_records() -> None:
    """The host records the same words as the user's and the system's: two records, each
    costing its own (the kernel labels the host's texts, it never merges them)."""
    k = Kernel(Policy(version="fak-policy/v2", tools={"send": ToolDecl("EGRESS", ("/to",))}))
    text = "alpha " * 20
    k.record_trusted("s", text, "user")
    before = k.grounding.stats()["grounding_bytes"]
    k.record_trusted("s", text, "system")
    k.record_trusted_many("s", [("developer", text), ("user", text)])
    assert k.grounding.stats()["grounding_bytes"] == before + 2 * 270
