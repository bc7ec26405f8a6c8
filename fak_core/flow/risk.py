"""Risk assessment: a classification, a confidence and whether approval is required.

Per node, every capability contributes a level: the level the workspace declares for
that exact version when it declares one, else one inferred from the capability's kind
and name (exec or destructive tools high, egress and write-shaped tools and any
extension medium, the rest low). The node's level is the highest; its confidence is
0.5 plus half the share of declared (not inferred) levels. Approval is required when the
node asks for it or its level reaches the flow policy's threshold. The flow takes the
highest level, the lowest confidence and any approval. The assessment explains and is
audited; it never blocks preflight on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fak_core.floor import is_write_shaped
from fak_core.flow.model import RISK_LEVELS, Flow, Node
from fak_core.flow.refs import CapabilityRef
from fak_core.sinks import Sink, classify

__all__ = ["NodeRisk", "RiskAssessment", "assess", "level_at_least"]

#: Looks up the declared risk of an exact reference (None when not declared or unknown).
DeclaredRisk = Callable[[CapabilityRef], str | None]


def level_at_least(level: str, threshold: str) -> bool:
    return RISK_LEVELS.index(level) >= RISK_LEVELS.index(threshold)


@dataclass(frozen=True, slots=True)
class NodeRisk:
    node: str
    level: str
    confidence: float
    approval_required: bool
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "level": self.level,
            "confidence": self.confidence,
            "approval_required": self.approval_required,
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True, slots=True)
class RiskAssessment:
    level: str
    confidence: float
    approval_required: bool
    nodes: tuple[NodeRisk, ...]

    def node(self, node_id: str) -> NodeRisk:
        for n in self.nodes:
            if n.node == node_id:
                return n
        raise KeyError(node_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "confidence": self.confidence,
            "approval_required": self.approval_required,
            "nodes": [n.to_dict() for n in self.nodes],
        }


def _inferred(ref: CapabilityRef) -> tuple[str, str]:
    if ref.kind == "tool":
        sink = classify(ref.name, {})
        if sink in (Sink.EXEC, Sink.DESTRUCTIVE):
            return "high", f"tool {ref.name} is an {sink.value} sink"
        if sink is Sink.EGRESS:
            return "medium", f"tool {ref.name} is an EGRESS sink"
        if is_write_shaped(ref.name):
            return "medium", f"tool {ref.name} writes"
        return "low", f"tool {ref.name} reads"
    if ref.kind == "extension":
        return "medium", f"extension {ref.name} reaches an external system"
    return "low", f"skill {ref.name} is instructions only"


def _node(node: Node, threshold: str, declared: DeclaredRisk) -> NodeRisk:
    levels: list[str] = []
    reasons: list[str] = []
    n_declared = 0
    for ref in node.capability_refs():
        d = declared(ref)
        if d is not None:
            n_declared += 1
            levels.append(d)
            reasons.append(f"{ref.kind} {ref} declared {d}")
        else:
            level, why = _inferred(ref)
            levels.append(level)
            reasons.append(f"{why} (inferred {level})")
    level = max(levels, key=RISK_LEVELS.index) if levels else "low"
    confidence = 1.0 if not levels else round(0.5 + 0.5 * n_declared / len(levels), 4)
    approval = node.approval_required or level_at_least(level, threshold)
    if node.approval_required:
        reasons.append("the node asks for approval")
    elif approval:
        reasons.append(f"level {level} reaches the approval threshold {threshold}")
    return NodeRisk(node.id, level, confidence, approval, tuple(reasons))


def assess(flow: Flow, declared: DeclaredRisk | None = None) -> RiskAssessment:
    """Assess every node and the flow; deterministic for a given flow and declarations."""
    lookup: DeclaredRisk = declared if declared is not None else (lambda _ref: None)
    nodes = tuple(_node(n, flow.policy.approval_threshold, lookup) for n in flow.nodes)
    return RiskAssessment(
        level=max((n.level for n in nodes), key=RISK_LEVELS.index, default="low"),
        confidence=min((n.confidence for n in nodes), default=1.0),
        approval_required=any(n.approval_required for n in nodes),
        nodes=nodes,
    )
