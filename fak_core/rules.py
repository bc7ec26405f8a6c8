"""Argument rules (policy v2): ordered per-tool rules over a call's arguments and taint.

A rule names a tool, a JSON Schema condition on the arguments (``when``; absent: every
call), a taint condition (``taint``: ``any``, ``trusted``: the session is clean,
``tainted``: tainted or quarantined), an effect and a priority. For a call, the tool's
rules are tried by priority (highest first), ties in file order; the first whose
conditions hold decides the rules' opinion:

- ``deny``: DENY with the rule's reason and claim;
- ``witness``: REQUIRE_WITNESS (a human's approval token or another resolver may let it
  through, :mod:`fak_core.approvals`), reason TRUST_VIOLATION unless the rule names one;
- ``allow``: no objection (DEFER). An allow rule only stops later rules from matching: it
  never lifts a refusal of the sink gate or the capability floor, and it grants nothing
  the floor does not (the fold takes the most restrictive verdict).

No rule matching is no objection. The rules run at rank 40, after the sink gate and
before the floor; unparseable arguments are left to the floor (MALFORMED).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fak_core.ledger import TaintLedger
from fak_core.nonblocking import nonblocking
from fak_core.reasons import Reason, ReasonRegistry
from fak_core.schemas import CompiledSchema, compile_schema
from fak_core.taint import Taint
from fak_core.verdicts import Verdict
from fak_core.view import CallView

__all__ = ["EFFECTS", "TAINT_CONDITIONS", "ArgumentRule", "RuleGate"]

EFFECTS = ("allow", "deny", "witness")
TAINT_CONDITIONS = ("any", "trusted", "tainted")
BY = "rules"
_NO_OPINION = Verdict.defer(BY)


@dataclass(frozen=True, slots=True)
class ArgumentRule:
    """One ordered rule; see the module docstring for its meaning."""

    tool: str
    effect: str
    when: Any = True
    taint: str = "any"
    priority: int = 0
    reason: str = ""
    claim: str = ""


@nonblocking
class RuleGate:
    """The adjudicator that applies a policy's argument rules."""

    def __init__(
        self,
        ledger: TaintLedger,
        rules: tuple[ArgumentRule, ...] = (),
        reasons: ReasonRegistry | None = None,
    ) -> None:
        self.ledger = ledger
        self.reasons = reasons if reasons is not None else ReasonRegistry()
        self.set_rules(rules)

    def set_rules(self, rules: tuple[ArgumentRule, ...]) -> None:
        table: dict[str, list[tuple[int, int, ArgumentRule, CompiledSchema, int]]] = {}
        for i, r in enumerate(rules):
            default = Reason.POLICY_BLOCK if r.effect == "deny" else Reason.TRUST_VIOLATION
            code = self.reasons.code(r.reason) if r.reason else int(default)
            entry = (-r.priority, i, r, compile_schema(r.when, r.tool), code)
            table.setdefault(r.tool, []).append(entry)
        self._rules = {
            tool: sorted(entries, key=lambda e: (e[0], e[1])) for tool, entries in table.items()
        }

    def adjudicate(self, view: CallView) -> Verdict:
        rules = self._rules.get(view.call.tool)
        if not rules:
            return _NO_OPINION
        args = view.args()
        if args is None:
            return _NO_OPINION  # the floor refuses it as MALFORMED
        call = view.call
        flow = self.ledger.level(call.trace_id)
        if call.args_taint == Taint.QUARANTINED:
            flow = Taint.QUARANTINED
        for _, index, rule, when, code in rules:
            if rule.taint == "trusted" and flow != Taint.TRUSTED:
                continue
            if rule.taint == "tainted" and flow == Taint.TRUSTED:
                continue
            if not when.is_valid(args):
                continue
            if rule.effect == "allow":
                return _NO_OPINION
            claim = rule.claim or f"argument rule {index} for {rule.tool} ({rule.effect})"
            meta = {"rule": str(index)}
            if rule.effect == "deny":
                return Verdict.deny(code, BY, claim=claim, meta=meta)
            return Verdict.require_witness(claim, BY, code, meta=meta)
        return _NO_OPINION
