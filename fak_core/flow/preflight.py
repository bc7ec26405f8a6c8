"""Plan preflight: seven steps that re-check a flow under the current identity and freeze it.

1. resolve inputs (identity, workspace, repository, baseline branch, requirement
   sources, capabilities available now) through a :class:`~fak_core.flow.resolver.Resolver`;
2. determine the flow (the existing version the user chose, or one from a generator hook);
3. compile it with the shared compiler;
4. assess risk (persisted; never blocks on its own);
5. re-authorise every exact reference and validate repository, branch, models,
   compatibility, budget and risk; floating references are rejected, nothing substituted;
6. freeze the snapshot, the execution specification and the exact capability lock
   (secret-free, scanned);
7. digest the whole specification (SHA-256 over RFC 8785 canonical JSON).

Every step leaves a :class:`~fak_core.flow.findings.StepResult`; the pipeline stops at
the first failing step, marks the rest skipped and names a repair entry point.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fak_core.flow.canonical import CanonicalError, digest
from fak_core.flow.compiler import CHECKS as COMPILER_CHECKS
from fak_core.flow.compiler import compile_flow
from fak_core.flow.findings import Finding, StepResult, StepStatus, repair_hint
from fak_core.flow.manifest import Manifest, build_body, requirement_entry
from fak_core.flow.model import (
    Flow,
    FlowSpecError,
    RequirementSpec,
    flow_from_dict,
    flow_to_dict,
    load_flow,
)
from fak_core.flow.refs import CapabilityRef
from fak_core.flow.resolver import FileWorkspace, Resolver, User, VersionInfo
from fak_core.flow.risk import RiskAssessment, assess
from fak_core.flow.runner import revalidate
from fak_core.flow.secretscan import scan

__all__ = [
    "STEPS",
    "STEP_CHECKS",
    "ExistingFlow",
    "GeneratedFlow",
    "GenerationContext",
    "PreflightOutcome",
    "PrivateLayer",
    "Repair",
    "preflight",
]

STEPS = (
    "resolve-inputs",
    "determine-flow",
    "compile",
    "assess-risk",
    "reauthorise",
    "freeze",
    "digest",
)

Progress = Callable[[int, str, str], None]

#: The checks each step runs (recorded in its result whether it passes or fails).
STEP_CHECKS: dict[str, tuple[str, ...]] = {
    "resolve-inputs": (
        "workspace", "identity", "flow-version", "repository", "baseline-branch",
        "requirement-sources", "capabilities-available",
    ),
    "determine-flow": ("flow-origin", "generated-flow-shape", "generated-flow-inputs"),
    "compile": COMPILER_CHECKS,
    "assess-risk": ("classification", "confidence", "approval"),
    "reauthorise": (
        "exact-references", "no-floating-references", "grants", "repository-and-branch",
        "models", "compatibility", "budget", "risk",
    ),
    "freeze": ("snapshot", "execution-specification", "capability-lock", "secret-free"),
    "digest": ("rfc8785-canonical-json", "sha256", "runner-revalidation"),
}  # fmt: skip


@dataclass(frozen=True)
class ExistingFlow:
    """The flow version the user chose: a file or an already loaded :class:`Flow`."""

    flow: Flow | str | Path
    version: str | None = None


@dataclass(frozen=True)
class GenerationContext:
    """What a generator hook may see: resolved inputs, never more than the user's view."""

    identity: str
    workspace: str
    repository: str
    baseline_branch: str
    requirements: tuple[RequirementSpec, ...]
    capabilities: tuple[str, ...]


@dataclass(frozen=True)
class GeneratedFlow:
    """A flow an agent generates for the task's inputs (repository, branch, requirements)."""

    generator: str
    hook: Callable[[GenerationContext], Flow | Mapping[str, Any]]
    repository: str
    baseline_branch: str
    requirements: tuple[RequirementSpec, ...] = ()


@dataclass(frozen=True)
class Repair:
    """Where to start fixing a failed preflight: the step, why, and what to change."""

    step: str
    number: int
    reason: str
    changes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "number": self.number,
            "reason": self.reason,
            "changes": list(self.changes),
        }


@dataclass(frozen=True)
class PrivateLayer:
    """What the sandbox needs but the manifest never holds (credential references)."""

    credentials: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def all_refs(self) -> tuple[str, ...]:
        return tuple(sorted({c for refs in self.credentials.values() for c in refs}))


@dataclass(frozen=True)
class PreflightOutcome:
    steps: tuple[StepResult, ...]
    manifest: Manifest | None = None
    private: PrivateLayer | None = None
    repair: Repair | None = None

    @property
    def ok(self) -> bool:
        return self.manifest is not None and all(s.ok for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "digest": self.manifest.digest if self.manifest else None,
            "steps": [s.to_dict() for s in self.steps],
            "repair": self.repair.to_dict() if self.repair else None,
        }


class _Failed(Exception):
    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings


@dataclass
class _State:
    identity: str
    source: ExistingFlow | GeneratedFlow
    resolver: Resolver | None = None
    user: User | None = None
    flow: Flow | None = None
    repository: str = ""
    branch: str = ""
    requirements: tuple[RequirementSpec, ...] = ()
    revisions: dict[str, str] = field(default_factory=dict)
    origin: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] | None = None
    risk: RiskAssessment | None = None
    lock: list[dict[str, Any]] = field(default_factory=list)
    body: dict[str, Any] | None = None
    private: PrivateLayer | None = None
    manifest: Manifest | None = None


def _version_for(resolver: Resolver, ref: CapabilityRef) -> VersionInfo | None:
    info = resolver.capability(ref.kind, ref.name)
    if info is None:
        return None
    if ref.version is not None:
        return info.versions.get(ref.version)
    return info.by_digest(ref.digest) if ref.digest is not None else None


def _refs_with_paths(flow: Flow) -> list[tuple[str, str, CapabilityRef]]:
    """(path, model of the agent using it, ref) for every reference in the flow."""
    out = []
    for i, n in enumerate(flow.nodes):
        for fname in ("skills", "extensions", "tools"):
            for k, r in enumerate(getattr(n, fname)):
                out.append((f"nodes[{i}].{fname}[{k}]", n.model, r))
        for j, s in enumerate(n.subagents):
            for fname in ("skills", "tools"):
                for k, r in enumerate(getattr(s, fname)):
                    out.append((f"nodes[{i}].subagents[{j}].{fname}[{k}]", n.model, r))
    return out


def _step_resolve(st: _State, workspace: Resolver | str | Path) -> dict[str, Any]:
    if isinstance(workspace, (str, Path)):
        try:
            st.resolver = FileWorkspace.load(workspace)
        except FlowSpecError as exc:
            raise _Failed([Finding("WORKSPACE_INVALID", exc.path or "", str(exc))]) from None
    else:
        st.resolver = workspace
    r = st.resolver
    st.user = r.user(st.identity)
    if st.user is None:
        raise _Failed(
            [Finding("UNKNOWN_USER", "identity", f"{st.identity!r} is not a user of {r.name!r}")],
        )
    src = st.source
    if isinstance(src, ExistingFlow):
        try:
            st.flow = src.flow if isinstance(src.flow, Flow) else load_flow(src.flow)
        except FlowSpecError as exc:
            raise _Failed([Finding("FLOW_INVALID", exc.path, str(exc))]) from None
        st.repository, st.branch = st.flow.repository, st.flow.baseline_branch
        st.requirements = st.flow.requirements
    else:
        st.repository, st.branch, st.requirements = (
            src.repository,
            src.baseline_branch,
            src.requirements,
        )
    findings: list[Finding] = []
    repo = r.repository(st.repository)
    if repo is None:
        findings.append(
            Finding(
                "UNKNOWN_REPOSITORY",
                "repository.url",
                f"workspace {r.name!r} has no repository {st.repository!r}",
            )
        )
    elif st.branch not in repo.branches:
        findings.append(
            Finding(
                "UNKNOWN_BRANCH",
                "repository.baseline_branch",
                f"{st.repository} has no branch {st.branch!r}; has: {', '.join(repo.branches)}",
            )
        )
    for i, req in enumerate(st.requirements):
        path = f"requirements[{i}].location"
        if not any(fnmatch.fnmatchcase(req.location, g) for g in st.user.requirements):
            findings.append(
                Finding(
                    "REQUIREMENT_NOT_READABLE", path, f"{st.identity} may not read {req.location!r}"
                )
            )
            continue
        resolved = r.requirement(req.location)
        if resolved is None:
            findings.append(
                Finding(
                    "UNKNOWN_REQUIREMENT_SOURCE",
                    path,
                    f"requirement {req.name!r}: nothing at {req.location!r}",
                )
            )
        else:
            st.revisions[req.name] = resolved.revision
    if findings:
        raise _Failed(findings)
    return {
        "identity": st.identity,
        "workspace": r.name,
        "repository": st.repository,
        "baseline_branch": st.branch,
        "requirements": [
            {"name": q.name, "location": q.location, "revision": st.revisions[q.name]}
            for q in st.requirements
        ],
        "capabilities_available": len(r.capabilities()),
    }


def _source_digest(flow: Flow) -> str:
    """The digest of the flow as chosen; a flow with no canonical form fails the step."""
    try:
        return digest(flow_to_dict(flow))
    except CanonicalError as exc:
        raise _Failed([Finding("UNCANONICAL", "flow", str(exc))]) from None


def _step_determine(st: _State) -> dict[str, Any]:
    src = st.source
    assert st.resolver is not None
    if isinstance(src, ExistingFlow):
        assert st.flow is not None
        st.origin = {
            "kind": "existing",
            "version": src.version,
            "source_digest": _source_digest(st.flow),
        }
        return {"origin": st.origin, "flow": st.flow.name}
    ctx = GenerationContext(
        identity=st.identity,
        workspace=st.resolver.name,
        repository=st.repository,
        baseline_branch=st.branch,
        requirements=st.requirements,
        capabilities=tuple(f"{c.kind}:{c.name}" for c in st.resolver.capabilities()),
    )
    try:
        produced = src.hook(ctx)
        flow = (
            produced
            if isinstance(produced, Flow)
            else flow_from_dict(dict(produced), f"generator {src.generator}")
        )
    except FlowSpecError as exc:
        raise _Failed([Finding("FLOW_INVALID", exc.path, str(exc))]) from None
    except Exception as exc:  # a generator is foreign code: its failure is a finding
        raise _Failed(
            [
                Finding(
                    "GENERATOR_FAILED", "generator", f"{src.generator}: {type(exc).__name__}: {exc}"
                )
            ],
        ) from None
    mismatch = []
    if (flow.repository, flow.baseline_branch) != (st.repository, st.branch):
        mismatch.append(
            Finding(
                "FLOW_INPUT_MISMATCH",
                "repository",
                "the generated flow names a different repository or baseline branch",
            )
        )
    if flow.requirements != st.requirements:
        mismatch.append(
            Finding(
                "FLOW_INPUT_MISMATCH",
                "requirements",
                "the generated flow names different requirement sources",
            )
        )
    if mismatch:
        raise _Failed(mismatch)
    st.flow = flow
    st.origin = {
        "kind": "generated",
        "generator": src.generator,
        "source_digest": _source_digest(flow),
    }
    return {"origin": st.origin, "flow": flow.name}


def _step_compile(st: _State) -> dict[str, Any]:
    assert st.flow is not None
    compiled = compile_flow(st.flow)
    if not compiled.ok:
        raise _Failed(list(compiled.findings))
    st.plan = compiled.plan
    return {"order": compiled.plan["order"] if compiled.plan else []}


def _step_risk(st: _State) -> dict[str, Any]:
    assert st.flow is not None
    assert st.resolver is not None
    resolver = st.resolver

    def declared(ref: CapabilityRef) -> str | None:
        if ref.floating:
            return None
        v = _version_for(resolver, ref)
        return v.risk if v is not None else None

    st.risk = assess(st.flow, declared)
    return st.risk.to_dict()


def _step_reauthorise(st: _State) -> dict[str, Any]:
    assert st.flow is not None
    assert st.resolver is not None
    assert st.user is not None
    assert st.risk is not None
    r, user, flow = st.resolver, st.user, st.flow
    findings: list[Finding] = []
    lock: dict[tuple[str, str, str], dict[str, Any]] = {}
    for path, model, ref in _refs_with_paths(flow):
        if ref.floating:
            findings.append(
                Finding(
                    "FLOATING_REFERENCE",
                    path,
                    f"{ref.kind} {ref} is floating; preflight never resolves a tag again",
                )
            )
            continue
        info = r.capability(ref.kind, ref.name)
        if info is None:
            findings.append(
                Finding("UNKNOWN_CAPABILITY", path, f"workspace has no {ref.kind} {ref.name!r}")
            )
            continue
        v = _version_for(r, ref)
        if v is None:
            code = "UNKNOWN_VERSION" if ref.version is not None else "UNKNOWN_DIGEST"
            findings.append(Finding(code, path, f"{ref.kind} {ref} is not available now"))
            continue
        if v.withdrawn:
            findings.append(Finding("VERSION_WITHDRAWN", path, f"{ref.kind} {ref} was withdrawn"))
            continue
        if not user.granted(ref.kind, ref.name):
            findings.append(
                Finding("NOT_AUTHORISED", path, f"{user.name} holds no grant for {ref.key}")
            )
            continue
        if v.models and model not in v.models:
            findings.append(
                Finding(
                    "INCOMPATIBLE_CAPABILITY",
                    path,
                    f"{ref.kind} {ref} supports {', '.join(v.models)}, not {model}",
                )
            )
            continue
        entry: dict[str, Any] = {
            "kind": ref.kind,
            "name": ref.name,
            "version": v.version,
            "digest": v.digest,
        }
        if v.schema is not None and ref.kind == "tool":
            entry["schema"] = v.schema
        lock[(ref.kind, ref.name, v.version)] = entry
    repo = r.repository(flow.repository)
    if not any(fnmatch.fnmatchcase(flow.repository, g) for g in user.repositories):
        findings.append(
            Finding(
                "REPOSITORY_NOT_AUTHORISED",
                "repository.url",
                f"{user.name} may not use {flow.repository}",
            )
        )
    elif repo is None or flow.baseline_branch not in repo.branches:
        findings.append(
            Finding("UNKNOWN_BRANCH", "repository.baseline_branch", "the branch is gone")
        )
    allowed_models = r.models()
    tokens = runtime = 0
    for i, n in enumerate(flow.nodes):
        if n.model not in allowed_models:
            findings.append(
                Finding(
                    "MODEL_NOT_ALLOWED",
                    f"nodes[{i}].model",
                    f"model {n.model!r} is not allowed; use one of: "
                    f"{', '.join(allowed_models) or '(none listed)'}",
                )
            )
        for key in ("max_tokens", "timeout_s"):
            if key not in n.runtime:
                findings.append(
                    Finding(
                        "BUDGET_UNBOUNDED",
                        f"nodes[{i}].runtime.{key}",
                        f"node {n.id!r} sets no {key}; an unbounded node fits no budget",
                    )
                )
        tokens += int(n.runtime.get("max_tokens", 0))
        runtime += int(n.runtime.get("timeout_s", 0))
    ws_tokens, ws_runtime = r.budget()
    pol = flow.policy
    for label, used, flow_limit, ws_limit, path in (
        ("tokens", tokens, pol.budget_tokens, ws_tokens, "policy.budget.max_tokens"),
        (
            "runtime seconds",
            runtime,
            pol.budget_runtime_s,
            ws_runtime,
            "policy.budget.max_runtime_s",
        ),
    ):
        if used > flow_limit:
            findings.append(
                Finding(
                    "BUDGET_EXCEEDED",
                    path,
                    f"nodes need {used} {label}; the flow budget is {flow_limit}",
                )
            )
        if flow_limit > ws_limit:
            findings.append(
                Finding(
                    "BUDGET_EXCEEDED",
                    path,
                    f"flow budget {flow_limit} {label} exceeds the workspace limit {ws_limit}",
                )
            )
    risk_nodes = {n.node: n for n in st.risk.nodes}
    for i, n in enumerate(flow.nodes):
        nr = risk_nodes.get(n.id)
        if nr is None or not 0.0 <= nr.confidence <= 1.0:
            findings.append(Finding("RISK_INCOMPLETE", f"nodes[{i}]", "no usable risk assessment"))
        elif n.approval_required and not nr.approval_required:
            findings.append(
                Finding(
                    "RISK_GATE_MISSING", f"nodes[{i}]", "the approval the node asks for was lost"
                )
            )
    if findings:
        raise _Failed(
            findings,
        )
    st.lock = [lock[k] for k in sorted(lock)]
    return {
        "locked": [f"{e['kind']}:{e['name']}@{e['version']}" for e in st.lock],
        "budget": {"tokens": tokens, "runtime_s": runtime},
    }


def _step_freeze(st: _State, task_id: str) -> dict[str, Any]:
    assert st.flow is not None
    assert st.plan is not None
    assert st.risk is not None
    assert st.resolver is not None
    flow = st.flow
    requirements = [requirement_entry(q, st.revisions[q.name]) for q in flow.requirements]
    body = build_body(
        task={"id": task_id, "identity": st.identity, "workspace": st.resolver.name},
        flow=flow,
        origin=st.origin,
        plan=st.plan,
        lock=st.lock,
        risk=st.risk.to_dict(),
        requirements=requirements,
    )
    st.private = PrivateLayer({n.id: n.credentials for n in flow.nodes if n.credentials})
    private_values = (*st.resolver.private_values(), *st.private.all_refs())
    findings = scan(body, private_values, path="manifest")
    if findings:
        raise _Failed(findings)
    st.body = body
    return {"nodes": len(body["nodes"]), "locked": len(body["lock"])}


def _step_digest(st: _State) -> dict[str, Any]:
    assert st.body is not None
    try:
        manifest = Manifest.seal(st.body)
    except CanonicalError as exc:
        raise _Failed([Finding("UNCANONICAL", "manifest", str(exc))]) from None
    again = revalidate(manifest)  # the runner's own check, run once before anything is handed over
    if again:
        raise _Failed(list(again))
    st.manifest = manifest
    return {"digest": manifest.digest}


def preflight(
    source: ExistingFlow | GeneratedFlow,
    *,
    identity: str,
    workspace: Resolver | str | Path,
    task_id: str,
    on_progress: Progress | None = None,
) -> PreflightOutcome:
    """Run the seven steps; the outcome carries every step result and, on success, the manifest.

    Preflight creates no runtime resource, whatever happens; on failure the outcome names
    the failing step and a repair entry point, and no later step runs.
    """
    st = _State(identity, source)
    runs: list[Callable[[], dict[str, Any]]] = [
        lambda: _step_resolve(st, workspace),
        lambda: _step_determine(st),
        lambda: _step_compile(st),
        lambda: _step_risk(st),
        lambda: _step_reauthorise(st),
        lambda: _step_freeze(st, task_id),
        lambda: _step_digest(st),
    ]
    results: list[StepResult] = []
    repair: Repair | None = None
    for number, (name, run) in enumerate(zip(STEPS, runs, strict=True), start=1):
        if repair is not None:
            results.append(StepResult(name, number, StepStatus.SKIPPED))
            if on_progress:
                on_progress(number, name, StepStatus.SKIPPED)
            continue
        if on_progress:
            on_progress(number, name, "running")
        try:
            detail = run()
        except _Failed as failed:
            findings = tuple(sorted(set(failed.findings)))
            results.append(StepResult(name, number, StepStatus.FAILED, STEP_CHECKS[name], findings))
            changes = tuple(
                dict.fromkeys(f"{f.path or name}: {repair_hint(f.code)}" for f in findings)
            )
            repair = Repair(name, number, findings[0].message, changes)
        else:
            results.append(
                StepResult(name, number, StepStatus.PASSED, STEP_CHECKS[name], (), detail)
            )
        if on_progress:
            on_progress(number, name, results[-1].status)
    if repair is not None:
        return PreflightOutcome(tuple(results), None, None, repair)
    return PreflightOutcome(tuple(results), st.manifest, st.private, None)
