"""The wire verdict: a pure, total projection of a kernel verdict onto the wire vocabulary.

``{"kind", "reason"?, "by"?, "disposition"?, "detail": {"claim"}?}``. It renames, it never
decides: unknown kinds render as ``KIND_<n>`` and escalate; a result the kernel
quarantined renders as QUARANTINE.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fak_core.reasons import Disposition, Reason, ReasonRegistry
from fak_core.verdicts import KindRegistry, Verdict, VerdictKind

__all__ = ["render_verdict"]

_NO_DISPOSITION = frozenset(
    {VerdictKind.ALLOW, VerdictKind.TRANSFORM, VerdictKind.QUARANTINE, VerdictKind.DEFER}
)


def render_verdict(
    verdict: Verdict,
    kinds: KindRegistry,
    reasons: ReasonRegistry,
    result_meta: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Render ``verdict`` for the wire (``result_meta``: the admitted result's metadata)."""
    kind = verdict.kind
    out: dict[str, Any] = {"kind": kinds.name(kind)}
    if verdict.reason != Reason.NONE:
        out["reason"] = reasons.name(verdict.reason)
    if verdict.by:
        out["by"] = verdict.by
    if kind == VerdictKind.DENY:
        reason = verdict.reason if verdict.reason != Reason.NONE else Reason.DEFAULT_DENY
        out["disposition"] = reasons.disposition(reason).value
    elif kind not in _NO_DISPOSITION:
        out["disposition"] = Disposition.ESCALATE.value
    if verdict.claim:
        out["detail"] = {"claim": verdict.claim}
    if result_meta is not None and result_meta.get("admit") == "quarantined":
        out["kind"] = "QUARANTINE"
    return out
