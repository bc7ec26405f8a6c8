"""A task's launch: preflight first, resources only after it passes, then the runner.

Failing closed: a failed preflight creates no sandbox, service or task secret and keeps
its structured step results and repair entry point. A passed preflight gets a sandbox
(with the manifest mounted read-only), a service per node and a task secret holding the
credential references; the runner inside re-validates the mounted manifest against the
digest the execution specification carries, and if it refuses, every resource is
released. Nothing ever falls back to broader permissions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fak_core.flow.findings import Finding
from fak_core.flow.preflight import (
    ExistingFlow,
    GeneratedFlow,
    PreflightOutcome,
    Progress,
    Repair,
    preflight,
)
from fak_core.flow.resolver import Resolver
from fak_core.flow.resources import Resource, Resources
from fak_core.flow.runner import Fetcher, Runner, RunnerRefused

__all__ = ["ExecutionSpec", "TaskRecord", "launch_task"]


@dataclass(frozen=True)
class ExecutionSpec:
    """What the sandbox is handed: a content reference to the manifest and its digest."""

    task_id: str
    manifest_ref: str
    manifest_digest: str

    def to_dict(self) -> dict[str, str]:
        return {
            "task_id": self.task_id,
            "manifest": self.manifest_ref,
            "manifest_digest": self.manifest_digest,
        }


@dataclass
class TaskRecord:
    task_id: str
    status: str  # "preflight-failed", "runner-refused" or "running"
    preflight: PreflightOutcome
    spec: ExecutionSpec | None = None
    runner: Runner | None = None
    resources: list[Resource] = field(default_factory=list)
    refusal: tuple[Finding, ...] = ()

    @property
    def repair(self) -> Repair | None:
        return self.preflight.repair

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "status": self.status,
            "preflight": self.preflight.to_dict(),
            "spec": self.spec.to_dict() if self.spec else None,
            "refusal": [f.to_dict() for f in self.refusal],
        }


def launch_task(
    source: ExistingFlow | GeneratedFlow,
    *,
    identity: str,
    workspace: Resolver | str | Path,
    task_id: str,
    resources: Resources,
    fetcher: Fetcher,
    on_progress: Progress | None = None,
    mounted: bytes | None = None,
) -> TaskRecord:
    """Preflight, then create resources and start the runner (see the module docstring).

    ``mounted`` replaces the manifest bytes the sandbox receives (a test seam for what
    happens when the specification is altered in transit).
    """
    outcome = preflight(
        source, identity=identity, workspace=workspace, task_id=task_id, on_progress=on_progress
    )
    if not outcome.ok or outcome.manifest is None or outcome.private is None:
        return TaskRecord(task_id, "preflight-failed", outcome)
    manifest = outcome.manifest
    spec = ExecutionSpec(task_id, f"manifest://{task_id}", manifest.digest)
    data = mounted if mounted is not None else manifest.to_json().encode("utf-8")
    created: list[Resource] = []
    created.append(resources.create_sandbox(task_id, data))
    created.append(resources.create_task_secret(task_id, outcome.private.all_refs()))
    created.extend(resources.create_service(task_id, n) for n in manifest.node_ids)
    runner = Runner(data, fetcher, expected_digest=spec.manifest_digest)
    try:
        runner.start()
    except RunnerRefused as exc:
        for r in reversed(created):
            resources.release(r)
        return TaskRecord(task_id, "runner-refused", outcome, spec, None, created, exc.findings)
    return TaskRecord(task_id, "running", outcome, spec, runner, created)
