"""The closed vocabularies are append-only: a golden file pins every value ever shipped."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from fak_core import Disposition, KindRegistry, Reason, ReasonRegistry, VerdictKind

GOLDEN = Path(__file__).parent.parent / "golden" / "vocabulary.json"


def current() -> dict[str, Any]:
    kinds = KindRegistry()
    reasons = ReasonRegistry()
    return {
        "verdict_kinds": {k.name: {"code": int(k), "rank": kinds.rank(k)} for k in VerdictKind},
        "reasons": {r.name: int(r) for r in Reason},
        "dispositions": {r.name: reasons.disposition(r).value for r in Reason},
        "disposition_names": [d.value for d in Disposition],
    }


@pytest.mark.fak_theorem("A8")
def test_vocabulary_matches_golden_and_only_grows() -> None:
    now = current()
    golden = json.loads(GOLDEN.read_text())
    for section, entries in golden.items():
        assert section in now, f"vocabulary section {section} was removed"
        if isinstance(entries, list):
            assert now[section][: len(entries)] == entries, f"{section}: values changed or removed"
        else:
            for name, value in entries.items():
                assert now[section].get(name) == value, (
                    f"{section}.{name} was {value!r} and is now {now[section].get(name)!r}: "
                    "shipped values may never change"
                )
    if os.environ.get("FAK_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(now, indent=2) + "\n")
    assert now == golden, (
        "the vocabulary grew; if the addition is intended, rerun with FAK_UPDATE_GOLDEN=1 "
        "to append it to tests/golden/vocabulary.json"
    )


@pytest.mark.fak_theorem("A8")
def test_unknown_kind_ranks_and_falls_back_as_deny() -> None:
    kinds = KindRegistry()
    assert kinds.rank(9999) == kinds.rank(VerdictKind.DENY) == 100
    assert kinds.fallback(9999) == VerdictKind.DENY
    assert kinds.name(2000) == "KIND_2000"
    assert kinds.rank(VerdictKind.ALLOW) == 0
    assert (
        kinds.rank(VerdictKind.DEFER)
        < kinds.rank(VerdictKind.INDETERMINATE)
        < kinds.rank(VerdictKind.TRANSFORM)
        < kinds.rank(VerdictKind.QUARANTINE)
        < kinds.rank(VerdictKind.REQUIRE_WITNESS)
        < kinds.rank(VerdictKind.DENY)
    )


def test_extension_kinds_and_reasons_register_per_instance() -> None:
    a, b = KindRegistry(), KindRegistry()
    a.register(1500, "ESCROW", 35, VerdictKind.DEFER)
    assert (a.rank(1500), a.fallback(1500), a.name(1500)) == (35, VerdictKind.DEFER, "ESCROW")
    assert (b.rank(1500), b.name(1500)) == (100, "KIND_1500")
    with pytest.raises(ValueError, match=">= 1024"):
        a.register(7, "LOW", 5)
    with pytest.raises(ValueError, match="taken"):
        a.register(1500, "AGAIN", 5)
    r = ReasonRegistry()
    r.register(2048, "QUOTA_GONE", Disposition.WAIT)
    assert (r.name(2048), r.code("QUOTA_GONE"), r.disposition(2048)) == (
        "QUOTA_GONE",
        2048,
        Disposition.WAIT,
    )
    assert ReasonRegistry().name(2048) == "REASON_2048"
    with pytest.raises(KeyError, match="valid reasons: DEFAULT_DENY"):
        ReasonRegistry().code("NOPE")


@pytest.mark.fak_theorem("A8")
def test_disposition_map() -> None:
    r = ReasonRegistry()
    assert r.disposition(Reason.MALFORMED) is Disposition.RETRYABLE
    assert r.disposition(Reason.MISROUTE) is Disposition.RETRYABLE
    assert r.disposition(Reason.RATE_LIMITED) is Disposition.WAIT
    assert r.disposition(Reason.LEASE_HELD) is Disposition.WAIT
    assert r.disposition(Reason.SELF_MODIFY) is Disposition.ESCALATE
    assert r.disposition(Reason.TRUST_VIOLATION) is Disposition.ESCALATE
    for other in (Reason.DEFAULT_DENY, Reason.POLICY_BLOCK, Reason.EGRESS_BLOCK, Reason.NONE):
        assert r.disposition(other) is Disposition.TERMINAL
