"""A8's extension registries only grow: every registration is checked against a model.

Generated sequences of registrations of verdict kinds, reasons and sink classes (codes on
both sides of 1024 and the core ones, names taken, lower case, empty, punctuated, with
underscores and digits; ranks and fallbacks at and past their bounds) run against a dict
that applies the theorem's rules, written here: a refused registration raises
``ValueError`` and changes nothing; an accepted one adds exactly its entry. Names are
drawn from ASCII; the oracle's UPPER_SNAKE_CASE is a regular expression, not the
registries' test.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import Disposition, KindRegistry, Reason, ReasonRegistry, VerdictKind
from fak_core.sinkclasses import BUILTIN_SINK_CLASSES, SinkClassRegistry

UPPER_SNAKE = re.compile(r"[A-Z0-9_]*[A-Z0-9][A-Z0-9_]*")
CORE_KIND_NAMES = {k.name for k in VerdictKind}
CORE_REASON_NAMES = {r.name for r in Reason}
KIND_ERROR = "kind|rank of|fallback of"  # each refusal names what it refuses

_names = st.sampled_from(
    [
        "ESCROW",
        "HOLD_2",
        "A",
        "_",
        "__",
        "A_B",
        "9",
        "hold",
        "Hold",
        "A-B",
        "A B",
        "",
        "DENY",
        "NONE",
        "ALLOW",
        "TRUST_VIOLATION",
        "EGRESS",
        "X_",
    ]
) | st.text(st.sampled_from("AZaz09_-"), max_size=4)
_codes = st.sampled_from([0, 1, 6, 1022, 1023, 1024, 1025, 2048, 1 << 20]) | st.integers(1000, 1030)


@st.composite
def kind_ops(draw: st.DrawFn) -> tuple[int, str, int, VerdictKind]:
    rank = draw(st.sampled_from([-1, 0, 1, 35, 99, 100, 101]))
    return draw(_codes), draw(_names), rank, draw(st.sampled_from(list(VerdictKind)))


@pytest.mark.fak_theorem("A8")
@settings(max_examples=150, deadline=None)
@given(st.lists(kind_ops(), max_size=8))
def test_kind_registrations_only_add(ops: list[tuple[int, str, int, VerdictKind]]) -> None:
    reg = KindRegistry()
    names = {int(k): k.name for k in VerdictKind}
    ranks: dict[int, int] = {}
    fallbacks: dict[int, int] = {}
    for code, name, rank, fallback in ops:
        ok = (
            code >= 1024
            and UPPER_SNAKE.fullmatch(name) is not None
            and code not in names
            and name not in names.values()
            and 0 <= rank <= 100
            and fallback in (VerdictKind.DENY, VerdictKind.ALLOW, VerdictKind.DEFER)
        )
        if ok:
            assert reg.register(code, name, rank, fallback) == code
            names[code], ranks[code], fallbacks[code] = name, rank, int(fallback)
        else:
            with pytest.raises(ValueError, match=KIND_ERROR):
                reg.register(code, name, rank, fallback)
        for c in {*names, code}:
            assert reg.known(c) == (c in names)
            assert reg.name(c) == names.get(c, f"KIND_{c}")
            if c in ranks:
                assert (reg.rank(c), reg.fallback(c)) == (ranks[c], fallbacks[c])
            elif c not in VerdictKind.__members__.values():
                assert (reg.rank(c), reg.fallback(c)) == (100, VerdictKind.DENY)


@pytest.mark.fak_theorem("A8")
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_codes, _names, st.sampled_from(list(Disposition))), max_size=8))
def test_reason_registrations_only_add(ops: list[tuple[int, str, Disposition]]) -> None:
    reg = ReasonRegistry()
    by_code = {int(r): r.name for r in Reason}
    dispositions = {int(r): reg.disposition(r) for r in Reason}
    for code, name, disposition in ops:
        ok = (
            code >= 1024
            and UPPER_SNAKE.fullmatch(name) is not None
            and code not in by_code
            and name not in by_code.values()
        )
        if ok:
            assert reg.register(code, name, disposition) == code
            by_code[code], dispositions[code] = name, disposition
        else:
            with pytest.raises(ValueError, match="reason"):
                reg.register(code, name, disposition)
        for c in {*by_code, code}:
            assert reg.name(c) == by_code.get(c, f"REASON_{c}")
            assert reg.disposition(c) == dispositions.get(c, Disposition.TERMINAL)
        for n in {*by_code.values(), name}:
            codes = [c for c, m in by_code.items() if m == n]
            if codes:
                assert reg.code(n) == codes[0]
            else:
                with pytest.raises(KeyError) as err:
                    reg.code(n)
                listed = str(err.value)
                assert all(m in listed for m in by_code.values() if m != "NONE")


@pytest.mark.fak_theorem("A8")
@settings(max_examples=150, deadline=None)
@given(st.lists(_names, max_size=8))
def test_sink_class_registrations_only_add(ops: list[str]) -> None:
    reg = SinkClassRegistry()
    names = list(BUILTIN_SINK_CLASSES)
    for name in ops:
        if UPPER_SNAKE.fullmatch(name) and name != "NONE" and name not in names:
            assert reg.register(name) == name
            names.append(name)
        else:
            with pytest.raises(ValueError, match="sink class"):
                reg.register(name)
        assert reg.names() == tuple(names)
        assert all(n in reg for n in names) and "NONE" not in reg


@pytest.mark.fak_theorem("A8")
def test_each_kind_refusal_and_its_edges() -> None:
    """Every rule once, at its edge: the sequences above sample them, this reads each."""
    reg = KindRegistry()
    assert reg.register(1024, "LOWEST", 0, VerdictKind.ALLOW) == 1024  # code and rank edges
    assert reg.register(1025, "HIGHEST", 100, VerdictKind.DEFER) == 1025
    bad = [
        (1023, "BELOW", 5, VerdictKind.DENY),
        (1024, "AGAIN", 5, VerdictKind.DENY),  # code taken by an extension
        (int(VerdictKind.DENY), "CORE", 5, VerdictKind.DENY),  # a core code
        (1026, "LOWEST", 5, VerdictKind.DENY),  # name taken by an extension
        (1027, "QUARANTINE", 5, VerdictKind.DENY),  # a core name
        (1028, "NEG", -1, VerdictKind.DENY),
        (1029, "OVER", 101, VerdictKind.DENY),
        (1030, "FALLS", 5, VerdictKind.TRANSFORM),
        (1031, "", 5, VerdictKind.DENY),
        (1032, "escrow", 5, VerdictKind.DENY),
        (1033, "_", 5, VerdictKind.DENY),
    ]
    for code, name, rank, fallback in bad:
        with pytest.raises(ValueError, match=KIND_ERROR):
            reg.register(code, name, rank, fallback)
    assert reg.register(1034, "A_1", 5) == 1034  # underscores and digits are snake case
    for c in (1023, 1026, 1027, 1028, 1029, 1030, 1031, 1032, 1033):
        assert not reg.known(c) and reg.rank(c) == 100
    lowest = (reg.name(1024), reg.rank(1024), reg.fallback(1024))
    assert lowest == ("LOWEST", 0, VerdictKind.ALLOW)
    assert (reg.name(1025), reg.rank(1025), reg.fallback(1025)) == (
        "HIGHEST",
        100,
        VerdictKind.DEFER,
    )
    assert reg.name(VerdictKind.DENY) == "DENY"


@pytest.mark.fak_theorem("A8")
def test_each_reason_refusal_and_its_edges() -> None:
    """1024 is the core EGRESS_BLOCK, so the first free extension code is 1025."""
    reg = ReasonRegistry()
    assert reg.register(1025, "AT_EDGE", Disposition.WAIT) == 1025
    assert reg.register(1026, "A_1") == 1026
    for code, name in [
        (1023, "BELOW"),
        (1024, "FIRST"),  # the core EGRESS_BLOCK's code
        (1025, "AGAIN"),  # code taken by an extension
        (1027, "AT_EDGE"),  # name taken by an extension
        (1028, "EGRESS_BLOCK"),  # a core name
        (1029, "lower"),
        (1030, ""),
        (1031, "_"),
        (1032, "A-B"),
    ]:
        with pytest.raises(ValueError, match="reason"):
            reg.register(code, name)
    assert [reg.name(c) for c in (1025, 1026, 1027, 1029)] == [
        "AT_EDGE",
        "A_1",
        "REASON_1027",
        "REASON_1029",
    ]
    assert (reg.code("AT_EDGE"), reg.disposition(1025), reg.disposition(1026)) == (
        1025,
        Disposition.WAIT,
        Disposition.TERMINAL,
    )
    assert reg.name(1024) == "EGRESS_BLOCK"
