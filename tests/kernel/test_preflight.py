"""The preflight ladder: cheapest-first, short-circuit, exact negative rows, bounded ledger."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import (
    CallView,
    Catch,
    Kernel,
    Ladder,
    Reason,
    SchemaRegistry,
    ToolCall,
    VerdictKind,
    parse_policy,
)
from fak_core.preflight import SchemaRung
from fak_core.schemas import compile_schema

SCHEMA = {
    "type": "object",
    "properties": {"origin": {"type": "string", "minLength": 3}, "n": {"type": "integer"}},
    "required": ["origin"],
    "additionalProperties": False,
}


def ladder(**kw: object) -> Ladder:
    schemas = SchemaRegistry()
    schemas.register("search_flights", SCHEMA)
    return Ladder(schemas, **kw)  # type: ignore[arg-type]


@dataclass
class CostRung:
    """A user rung with a declared cost that catches when ``catch`` is set."""

    name: str
    cost: float
    catch: bool
    log: list[str]

    def check(self, view: CallView) -> Catch | None:
        self.log.append(self.name)
        return Catch(Reason.POLICY_BLOCK, f"{self.name} caught") if self.catch else None


@pytest.mark.fak_theorem("A7.1", "A7.2")
def test_rung0_malformed_json_is_denied_and_rung1_never_runs() -> None:
    lad = ladder()
    seen: list[int] = []
    lad.set_probe(lambda n, r: seen.append(n))
    v = lad.adjudicate(CallView(ToolCall("search_flights", "{bad")))
    assert (v.kind, v.reason, v.by) == (VerdictKind.DENY, Reason.MALFORMED, "preflight")
    assert seen == [0]
    (row,) = lad.negatives.rows()
    assert (row.rung_passed, row.rung_failed, row.verdict, row.reason) == (
        -1,
        0,
        "DENY",
        "MALFORMED",
    )
    assert row.call_hash.startswith("search_flights:") and len(row.call_hash) > 20


@pytest.mark.fak_theorem("A7.1", "A7.3")
def test_rung1_schema_catch_row_names_path_and_keyword() -> None:
    lad = ladder()
    v = lad.adjudicate(CallView(ToolCall("search_flights", '{"origin": 123}')))
    assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.MALFORMED)
    (row,) = lad.negatives.rows()
    assert (row.rung_passed, row.rung_failed) == (0, 1)
    assert row.detail.startswith("$.origin: type:")
    assert set(row.as_dict()) == {
        "call_hash",
        "rung_passed",
        "rung_failed",
        "verdict",
        "reason",
        "detail",
    }


@pytest.mark.fak_theorem("A7.3")
def test_full_draft_2020_12_not_only_required_and_type() -> None:
    lad = ladder()
    for args, keyword in [
        ('{"origin": "SF"}', "minLength"),
        ('{"origin": "SFO", "extra": 1}', "additionalProperties"),
        ('{"origin": "SFO", "n": 1.5}', "type"),
        ("{}", "required"),
    ]:
        v = lad.adjudicate(CallView(ToolCall("search_flights", args)))
        assert v.kind == VerdictKind.DENY, args
        assert f": {keyword}:" in v.claim, (args, v.claim)


@pytest.mark.fak_theorem("A7.3")
def test_a_call_that_passes_every_rung_is_deferred_never_allowed() -> None:
    lad = ladder()
    for args in ['{"origin": "SFO"}', '{"origin": "SFO", "n": 2}']:
        v = lad.adjudicate(CallView(ToolCall("search_flights", args)))
        assert (v.kind, v.by) == (VerdictKind.DEFER, "preflight")
    # no schema, empty arguments: both fine for the ladder
    assert lad.adjudicate(CallView(ToolCall("other", ""))).kind == VerdictKind.DEFER
    assert lad.catch_rate().caught == 0


# The ladder's counters are updated by the anchors of A7.1 and A7.2 too, so this is their
# witness as well: a generated mutant of a counter there must not survive.
@pytest.mark.fak_theorem("A7.3", "A7.1", "A7.2")
def test_catch_rate_counts_lifetime_calls() -> None:
    lad = ladder()
    assert (lad.catch_rate().caught, lad.catch_rate().total, lad.catch_rate().rate) == (0, 0, 0.0)
    for args in ["{bad", '{"origin": 1}', '{"origin": "SFO"}', "", "{}"]:
        lad.adjudicate(CallView(ToolCall("search_flights" if args != "" else "x", args)))
    rate = lad.catch_rate()
    assert (rate.caught, rate.total) == (3, 5)
    assert rate.rate == 0.6


@pytest.mark.fak_theorem("A7.1", "A7.2")
@given(
    costs=st.lists(st.floats(min_value=-10, max_value=10, allow_nan=False), min_size=1, max_size=6),
    catching=st.data(),
)
def test_rungs_run_in_ascending_cost_and_stop_at_the_first_catch(
    costs: list[float], catching: st.DataObject
) -> None:
    catches = catching.draw(st.lists(st.booleans(), min_size=len(costs), max_size=len(costs)))
    log: list[str] = []
    lad = ladder()
    rungs = [
        CostRung(f"r{i}", c, k, log) for i, (c, k) in enumerate(zip(costs, catches, strict=True))
    ]
    for r in rungs:
        lad.add_rung(r)
    order: list[str] = []
    lad.set_probe(lambda n, r: order.append(r.name))
    v = lad.adjudicate(CallView(ToolCall("search_flights", '{"origin": "SFO"}')))

    # the evaluation order is ascending declared cost (ties: first registered first)
    all_rungs = lad.rungs
    declared = [float(r.cost) for r in all_rungs]
    assert declared == sorted(declared)
    assert order == [r.name for r in all_rungs[: len(order)]]
    expected_catcher = next((r for r in all_rungs if getattr(r, "catch", False)), None)
    if expected_catcher is None:
        assert v.kind == VerdictKind.DEFER
        assert lad.negatives.rows() == []
        assert order == [r.name for r in all_rungs]
    else:
        assert v.kind == VerdictKind.DENY
        assert order[-1] == expected_catcher.name, "a costlier rung ran after the catch"
        (row,) = lad.negatives.rows()
        failed = all_rungs.index(expected_catcher)
        assert (row.rung_passed, row.rung_failed) == (failed - 1, failed)


@pytest.mark.fak_theorem("A7.3")
def test_negatives_ledger_is_fifo_bounded_with_an_eviction_count() -> None:
    lad = ladder(max_negatives=16)
    for i in range(2_000):
        lad.adjudicate(CallView(ToolCall("search_flights", "{bad" + str(i))))
    assert len(lad.negatives) == 16
    assert lad.negatives.evicted == 2_000 - 16
    assert lad.catch_rate().caught == 2_000
    assert lad.negatives.rows()[-1].call_hash != lad.negatives.rows()[0].call_hash


@pytest.mark.fak_theorem("A7.3")
def test_require_schema_refuses_unknown_tools() -> None:
    lad = ladder(require_schema=True)
    v = lad.adjudicate(CallView(ToolCall("frobnicate", "{}")))
    assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.UNKNOWN_TOOL)
    assert v.claim == (
        "no schema is registered for tool 'frobnicate': register one or use a known tool"
    )


@pytest.mark.fak_theorem("A7.3")
def test_rung1_says_why_on_every_path() -> None:
    """Rung 1 reached by unparseable arguments (no parse rung below it) repeats rung 0's
    reason; an exactly-validated (multipleOf) schema and a false schema name path and
    keyword like the fast validator does."""
    schemas = SchemaRegistry()
    schemas.register("search_flights", SCHEMA)
    view = CallView(ToolCall("search_flights", "{bad"))
    catch = SchemaRung(schemas).check(view)
    assert view.error is not None and catch is not None
    assert (catch.reason, catch.detail) == (Reason.MALFORMED, view.error.detail)
    exact = compile_schema({"type": "object", "properties": {"n": {"multipleOf": 5}}})
    assert exact.first_error({"n": 3}) == "$.n: multipleOf: 3 is not a multiple of 5"
    assert compile_schema(False).first_error(1) == "$: schema: False schema does not allow 1"


@dataclass
class NotARung:
    name: str = "no-check"
    cost: float = 0.5


@pytest.mark.fak_theorem("A7.1")
def test_a_rung_the_order_cannot_place_is_refused() -> None:
    """The order is total over what the ladder accepts: no NaN cost, nothing without check."""
    lad = ladder()
    with pytest.raises(TypeError, match="is not a rung"):
        lad.add_rung(NotARung())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="has a NaN cost"):
        lad.add_rung(CostRung("nan", float("nan"), False, []))
    assert [r.name for r in lad.rungs] == ["parse", "schema"]


@pytest.mark.fak_theorem("A7.1", "A7.2")
@given(
    n=st.integers(min_value=1, max_value=5),
    cost=st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0]),
    catcher=st.data(),
)
def test_equal_costs_keep_registration_order_and_the_row_and_verdict_agree(
    n: int, cost: float, catcher: st.DataObject
) -> None:
    """Rungs of equal declared cost (with each other and with the built-in rungs) run in
    registration order; the catching rung's row and verdict carry the same rung numbers and
    the detail (the row's cut to 512 characters)."""
    log: list[str] = []
    k = catcher.draw(st.integers(min_value=0, max_value=n - 1))
    lad = ladder()
    for i in range(n):
        lad.add_rung(CostRung(f"u{i}-" + "x" * 600, cost, i == k, log))
    order: list[str] = []
    lad.set_probe(lambda num, r: order.append(r.name))
    v = lad.adjudicate(CallView(ToolCall("search_flights", '{"origin": "SFO"}')))
    builtins = {"parse": 0.0, "schema": 1.0}
    expected = sorted(
        [*builtins, *(f"u{i}-" + "x" * 600 for i in range(n))],
        key=lambda name: builtins.get(name, cost),
    )  # sorted() is stable: equal costs stay in registration order, built-ins first
    assert [r.name for r in lad.rungs] == expected
    failed = expected.index(f"u{k}-" + "x" * 600)
    assert order == expected[: failed + 1]
    (row,) = lad.negatives.rows()
    assert row.detail == (f"u{k}-" + "x" * 600 + " caught")[:512]
    assert v.claim and row.detail.startswith(v.claim)  # the verdict cuts its claim shorter
    assert dict(v.meta) == {"rung_passed": str(failed - 1), "rung_failed": str(failed)}


def test_the_kernel_ladder_is_rank_10_in_the_default_chain() -> None:
    k = Kernel()
    k.register_schema("search_flights", SCHEMA)
    v = k.decide(ToolCall("search_flights", '{"origin": 5}'))
    assert (v.kind, v.by) == (VerdictKind.DENY, "preflight")
    assert k.ladder.negatives.rows()[0].rung_failed == 1


@pytest.mark.fak_theorem("A7.4")
def test_multiple_of_is_decided_exactly_not_in_floating_point() -> None:
    """jsonschema-rs takes 1.416682948592774e17 (exactly 141668294859277408) for a multiple
    of 5; rung 1 validates schemas with ``multipleOf`` exactly. Found by the A7.4 witness."""
    import jsonschema_rs

    schema = {"type": "object", "properties": {"v": {"type": "integer", "multipleOf": 5}}}
    text = '{"v": 1.416682948592774e17}'
    assert int(1.416682948592774e17) % 5 == 3
    # the upstream bug this works around; if this starts failing, jsonschema-rs fixed it
    assert jsonschema_rs.Draft202012Validator(schema).is_valid({"v": 1.416682948592774e17})
    kernel = Kernel(parse_policy({"version": "fak-policy/v1", "allow": ["t"]}))
    kernel.register_schema("t", schema)
    v = kernel.decide(ToolCall("t", text, trace_id="m"))
    assert (kernel.kinds.name(v.kind), kernel.reasons.name(v.reason)) == ("DENY", "MALFORMED")
    assert "$.v: multipleOf" in (v.claim or "")
    ok = kernel.decide(ToolCall("t", '{"v": 1.5e17}', trace_id="m"))  # 150000000000000000
    assert kernel.kinds.name(ok.kind) == "ALLOW"
