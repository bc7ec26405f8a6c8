"""Hypothesis strategies shared by the kernel tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from fak_core import CallView, Reason, Verdict, VerdictKind

CORE_KINDS = list(VerdictKind)


@dataclass
class Fixed:
    """An adjudicator that always answers ``verdict`` and records that it was asked."""

    verdict: Verdict
    calls: list[str] = field(default_factory=list)

    def adjudicate(self, view: CallView) -> Verdict:
        self.calls.append(view.call.tool)
        return self.verdict


def verdict_of(kind: int, i: int) -> Verdict:
    if kind == VerdictKind.DENY:
        return Verdict.deny(Reason.POLICY_BLOCK, f"a{i}")
    if kind == VerdictKind.TRANSFORM:
        return Verdict.transform("{}", f"a{i}")
    if kind == VerdictKind.QUARANTINE:
        return Verdict.quarantine(Reason.TRUST_VIOLATION, f"a{i}")
    if kind == VerdictKind.REQUIRE_WITNESS:
        return Verdict.require_witness("claim", f"a{i}")
    return Verdict(kind, Reason.NONE, f"a{i}")


kinds = st.sampled_from(CORE_KINDS)
chains = st.lists(kinds, max_size=8).map(
    lambda ks: [Fixed(verdict_of(k, i)) for i, k in enumerate(ks)]
)
