"""Structured check results shared by every preflight step, the compiler and the runner.

A :class:`Finding` is one problem: a stable ``code``, a human ``message`` and the
``path`` inside the document it concerns. A :class:`StepResult` records what one step
ran and what it found. :func:`repair_hint` says what to change for a finding code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Finding", "StepResult", "StepStatus", "repair_hint"]


class StepStatus:
    """The three states a step can end in (plain strings, so results serialise as-is)."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True, order=True, slots=True)
class Finding:
    """One problem found by a check: ``code`` (stable), ``path`` (where), ``message`` (what)."""

    code: str
    path: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "path": self.path, "message": self.message}


@dataclass(frozen=True, slots=True)
class StepResult:
    """The structured result of one preflight step."""

    step: str
    number: int
    status: str
    checks: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == StepStatus.PASSED

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "number": self.number,
            "status": self.status,
            "checks": list(self.checks),
            "findings": [f.to_dict() for f in self.findings],
            "detail": self.detail,
        }


_HINTS = {
    "WORKSPACE_INVALID": "fix the workspace file at the path named",
    "FLOW_INVALID": "fix the flow document at the path named",
    "FLOW_INPUT_MISMATCH": "a generated flow must keep the task's repository and requirements",
    "BUDGET_UNBOUNDED": "set runtime.max_tokens and runtime.timeout_s on the node",
    "RISK_INCOMPLETE": "every node needs a risk assessment",
    "UNKNOWN_USER": "run preflight as a user listed in the workspace file",
    "UNKNOWN_REPOSITORY": "use a repository the workspace declares, or add it to the workspace",
    "UNKNOWN_BRANCH": "pick a baseline branch the repository has",
    "UNKNOWN_REQUIREMENT_SOURCE": "point the requirement at a location that exists",
    "REQUIREMENT_NOT_READABLE": "ask for read access to the requirement source, or drop it",
    "GENERATOR_FAILED": "fix the flow generator, or choose an existing flow version",
    "DUPLICATE_NODE_ID": "give every node a unique id",
    "DUPLICATE_INPUT": "give every input of a node a unique name",
    "DUPLICATE_ARTIFACT": "give every output of a node a unique name",
    "MISSING_SOURCE": "give the input exactly one source: node_id.output or requirement:name",
    "MULTIPLE_SOURCES": "keep one source per input; split it into two inputs if both are needed",
    "UNQUALIFIED_REFERENCE": "write the source as node_id.output_name or requirement:name",
    "UNKNOWN_SOURCE": "reference a node output or requirement that the flow declares",
    "CYCLE": "break the dependency cycle; use a rework target to send work back upstream",
    "ILLEGAL_REWORK_TARGET": "a rework target must be a node upstream of this one",
    "TYPE_MISMATCH": "make the input type equal to the type of the artifact it reads",
    "FORMAT_MISMATCH": "make the input format contract equal to the artifact's format",
    "IMPLICIT_DEPENDENCY": "declare the placeholder as an input with a qualified source",
    "UNKNOWN_PLACEHOLDER": "declare an input with that name or remove the placeholder",
    "FLOATING_REFERENCE": "pin an exact version (name@1.2.3) or digest (name@sha256:...)",
    "UNKNOWN_CAPABILITY": "use a capability the workspace provides",
    "UNKNOWN_VERSION": "pin a version the workspace provides",
    "VERSION_WITHDRAWN": "pin a version that has not been withdrawn",
    "UNKNOWN_DIGEST": "pin a digest the workspace lists for this capability",
    "NOT_AUTHORISED": "ask for a grant for this capability, or remove it from the node",
    "REPOSITORY_NOT_AUTHORISED": "ask for access to the repository or use one you may use",
    "MODEL_NOT_ALLOWED": "choose a main agent model the workspace allows",
    "INCOMPATIBLE_CAPABILITY": "choose a capability version that supports the node's model",
    "BUDGET_EXCEEDED": "lower the node token limits or the flow budget to fit the limit",
    "RISK_GATE_MISSING": "risk requires approval; the node must carry an approval gate",
    "SECRET_IN_MANIFEST": "remove the secret-shaped value; credentials are injected at run time",
    "DIGEST_MISMATCH": "the manifest changed after preflight; run preflight again",
    "MALFORMED_MANIFEST": "regenerate the manifest with fak flow preflight",
    "PLAN_MISMATCH": "the frozen plan differs from its recompilation; run preflight again",
    "LOCK_MISMATCH": "the node's capabilities differ from the lock; run preflight again",
    "UNCANONICAL": "the document holds a value JSON canonicalisation cannot represent",
}


def repair_hint(code: str) -> str:
    """What to change to clear a finding with ``code`` (a generic hint when unknown)."""
    return _HINTS.get(code, "see the finding message")
