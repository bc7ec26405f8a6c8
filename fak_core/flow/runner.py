"""The runner's start-up: re-validate the frozen manifest, then materialise requirements once.

:func:`revalidate` is the check the runner makes before it starts, with the same code
preflight used: the recorded digest must equal the digest recomputed over the body (and
the digest the execution specification carries); the snapshot must compile, with the
shared compiler, to exactly the recorded plan; every node entry must equal the one the
snapshot gives (no reinterpretation of prompts); every capability reference must be
exact and covered by the lock, and the lock must hold nothing else; the body must be
secret-free. Any finding and the runner refuses to start.

Requirements are then fetched exactly once per task into a :class:`RequirementIndex`
keyed by source identity (location and pinned revision); retries, rework and every node
read the same local copy. Content that no longer matches the pinned revision is refused:
refreshing requirements takes a new task or a new revision, never a re-read mid-run.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fak_core.flow.canonical import CanonicalError
from fak_core.flow.compiler import compile_flow
from fak_core.flow.findings import Finding
from fak_core.flow.manifest import (
    Manifest,
    ManifestError,
    lock_entry_for,
    node_entries,
    requirement_entry,
)
from fak_core.flow.model import Flow, FlowSpecError, flow_from_dict
from fak_core.flow.refs import CapabilityRef
from fak_core.flow.resolver import requirement_path
from fak_core.flow.secretscan import scan

__all__ = [
    "FileFetcher",
    "Fetcher",
    "MaterialisedRequirement",
    "RequirementIndex",
    "Runner",
    "RunnerRefused",
    "load_verified_manifest",
    "revalidate",
]


class RunnerRefused(ManifestError):
    """The runner will not start: the manifest failed re-validation (see ``findings``)."""


def _all_refs(flow: Flow) -> list[tuple[str, CapabilityRef]]:
    out = []
    for i, n in enumerate(flow.nodes):
        for field in ("skills", "extensions", "tools"):
            for k, r in enumerate(getattr(n, field)):
                out.append((f"nodes[{i}].{field}[{k}]", r))
        for j, s in enumerate(n.subagents):
            for field in ("skills", "tools"):
                for k, r in enumerate(getattr(s, field)):
                    out.append((f"nodes[{i}].subagents[{j}].{field}[{k}]", r))
    return out


def revalidate(manifest: Manifest, expected_digest: str | None = None) -> tuple[Finding, ...]:
    """Every reason the runner must refuse ``manifest`` (empty when it may start)."""
    body = manifest.body
    out: list[Finding] = []
    try:
        actual = manifest.computed_digest()
    except CanonicalError as exc:
        return (Finding("UNCANONICAL", "manifest", str(exc)),)
    if actual != manifest.digest:
        out.append(
            Finding("DIGEST_MISMATCH", "digest", "the manifest body does not match its digest")
        )
    if expected_digest is not None and expected_digest != manifest.digest:
        out.append(
            Finding(
                "DIGEST_MISMATCH",
                "digest",
                "the manifest is not the one the execution specification names",
            )
        )
    try:
        out.extend(_content_findings(body))
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        out.append(Finding("MALFORMED_MANIFEST", "manifest", f"{type(exc).__name__}: {exc}"))
    out.extend(scan(body, path="manifest"))
    return tuple(sorted(set(out)))


def _content_findings(body: dict[str, Any]) -> list[Finding]:
    """Re-derive everything the body claims from its snapshot, with the shared compiler."""
    out: list[Finding] = []
    try:
        snapshot = body["snapshot"]["flow"]
        flow = flow_from_dict(snapshot, "manifest.snapshot.flow")
        plan, lock, risk = body["plan"], body["lock"], body["risk"]
    except (KeyError, TypeError) as exc:
        return [*out, Finding("MALFORMED_MANIFEST", "manifest", f"missing part {exc}")]
    except FlowSpecError as exc:
        return [*out, Finding("MALFORMED_MANIFEST", "manifest.snapshot.flow", str(exc))]
    if not isinstance(risk, dict):
        # the node entries' approvals come from the risk: without it they cannot be checked
        return [*out, Finding("MALFORMED_MANIFEST", "manifest.risk", "expected a risk object")]
    compiled = compile_flow(flow)
    out.extend(compiled.findings)
    if compiled.ok and compiled.plan != plan:
        out.append(Finding("PLAN_MISMATCH", "manifest.plan", "the plan differs from the snapshot"))
    if compiled.ok:
        expected_nodes = node_entries(flow, list(compiled.plan["order"]), risk)  # type: ignore[index]
        if expected_nodes != body.get("nodes"):
            out.append(
                Finding(
                    "PLAN_MISMATCH",
                    "manifest.nodes",
                    "node entries differ from the frozen snapshot (prompt, model, runtime or refs)",
                )
            )
    requirements = body.get("requirements")
    revisions = [r.get("revision") for r in requirements] if isinstance(requirements, list) else []
    for key, want in (
        ("repository", {"url": flow.repository, "baseline_branch": flow.baseline_branch}),
        (
            "requirements",
            [requirement_entry(q, r) for q, r in zip(flow.requirements, revisions, strict=False)]
            if len(revisions) == len(flow.requirements)
            else None,
        ),
        ("policy", snapshot.get("policy") if isinstance(snapshot, dict) else None),
    ):
        if key not in body or body[key] != want:  # a missing part is never what is wanted
            out.append(
                Finding("PLAN_MISMATCH", f"manifest.{key}", f"{key} differs from the snapshot")
            )
    used: set[tuple[str, str, str]] = set()
    if not isinstance(lock, list) or not all(isinstance(e, dict) for e in lock):
        return [*out, Finding("MALFORMED_MANIFEST", "manifest.lock", "expected a list of entries")]
    for path, ref in _all_refs(flow):
        if ref.floating:
            out.append(
                Finding(
                    "FLOATING_REFERENCE", f"manifest.snapshot.flow.{path}", f"{ref} is floating"
                )
            )
            continue
        entry = lock_entry_for(lock, ref)
        if entry is None:
            out.append(
                Finding("LOCK_MISMATCH", f"manifest.snapshot.flow.{path}", f"{ref} is not locked")
            )
        else:
            used.add((str(entry["kind"]), str(entry["name"]), str(entry.get("version"))))
    for i, e in enumerate(lock):
        if (str(e.get("kind")), str(e.get("name")), str(e.get("version"))) not in used:
            out.append(
                Finding("LOCK_MISMATCH", f"manifest.lock[{i}]", "a locked capability no node uses")
            )
    return out


def load_verified_manifest(path: str | Path, expected_digest: str | None = None) -> Manifest:
    """Read a manifest file and re-validate it; raise :class:`RunnerRefused` on any finding.

    This is what ``fak serve --manifest FILE --node ID`` calls before it builds the
    node's policy with :func:`fak_core.flow.kernel_policy_for`.
    """
    p = Path(path)
    try:
        text = p.read_bytes()
    except OSError as exc:
        raise ManifestError(f"cannot read manifest {p}: {exc.strerror}") from None
    manifest = Manifest.from_json(text, str(p))
    findings = revalidate(manifest, expected_digest)
    if findings:
        first = findings[0]
        raise RunnerRefused(
            f"{p}: refusing the manifest: {first.code} at {first.path}: {first.message}"
            + (f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""),
            findings,
        )
    return manifest


class Fetcher(Protocol):
    """Fetches the bytes of a requirement source from its location."""

    def fetch(self, location: str) -> bytes: ...


class FileFetcher:
    """Reads requirement locations as files (``file://``, absolute, or relative to ``root``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls = 0

    def fetch(self, location: str) -> bytes:
        self.calls += 1
        return requirement_path(self.root, location).read_bytes()


@dataclass(frozen=True, slots=True)
class MaterialisedRequirement:
    name: str
    location: str
    revision: str
    content: bytes

    @property
    def identity(self) -> tuple[str, str]:
        return (self.location, self.revision)


class RequirementIndex(Mapping[tuple[str, str], MaterialisedRequirement]):
    """The task's requirements, keyed by source identity ``(location, revision)``."""

    def __init__(self, items: list[MaterialisedRequirement]) -> None:
        self._by_id = {r.identity: r for r in items}
        self._by_name = {r.name: r for r in items}

    def __getitem__(self, key: tuple[str, str]) -> MaterialisedRequirement:
        return self._by_id[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def named(self, name: str) -> MaterialisedRequirement:
        return self._by_name[name]


class Runner:
    """Starts a task from its frozen manifest; refuses to start when re-validation fails."""

    def __init__(
        self, manifest: Manifest | bytes, fetcher: Fetcher, expected_digest: str | None = None
    ) -> None:
        self._raw = manifest
        self._fetcher = fetcher
        self._expected = expected_digest
        self._lock = threading.Lock()
        self._index: RequirementIndex | None = None
        self.manifest: Manifest | None = None

    def start(self) -> Manifest:
        """Re-validate, then materialise every requirement source once; idempotent."""
        with self._lock:
            if self.manifest is not None:
                return self.manifest
            raw = self._raw
            # a Manifest object gets the file's checks; revalidate reports a body with no
            # canonical form (UNCANONICAL) for both
            manifest = (
                Manifest.from_document(
                    {"digest": raw.digest, "manifest": raw.body}, "mounted", canonical=False
                )
                if isinstance(raw, Manifest)
                else Manifest.from_json(raw, "mounted")
            )
            findings = revalidate(manifest, self._expected)
            if findings:
                raise RunnerRefused(
                    f"refusing to start: {findings[0].code} at {findings[0].path}", findings
                )
            self._index = self._materialise(manifest)
            self.manifest = manifest
            return manifest

    def _materialise(self, manifest: Manifest) -> RequirementIndex:
        items: dict[tuple[str, str], MaterialisedRequirement] = {}
        for i, req in enumerate(manifest.body.get("requirements", [])):
            key = (req["location"], req["revision"])
            if key in items:
                items[key] = MaterialisedRequirement(req["name"], *key, items[key].content)
                continue
            try:
                data = self._fetcher.fetch(req["location"])
            except OSError as exc:
                raise RunnerRefused(
                    f"requirement {req['name']!r} cannot be read: {exc}",
                    [Finding("REQUIREMENT_UNAVAILABLE", f"manifest.requirements[{i}]", str(exc))],
                ) from None
            actual = "sha256:" + hashlib.sha256(data).hexdigest()
            if actual != req["revision"]:
                raise RunnerRefused(
                    f"requirement {req['name']!r} changed since preflight",
                    [
                        Finding(
                            "REQUIREMENT_CHANGED",
                            f"manifest.requirements[{i}]",
                            "the source no longer matches its pinned revision; "
                            "create a new task or revision to refresh it",
                        )
                    ],
                )
            items[key] = MaterialisedRequirement(req["name"], key[0], key[1], data)
        by_name = {
            r["name"]: items[(r["location"], r["revision"])]
            for r in manifest.body.get("requirements", [])
        }
        return RequirementIndex(
            [
                MaterialisedRequirement(n, m.location, m.revision, m.content)
                for n, m in sorted(by_name.items())
            ]
        )

    @property
    def requirements(self) -> RequirementIndex:
        if self._index is None:
            raise RuntimeError("the runner has not started")
        return self._index

    def requirement_inputs(
        self, node_id: str, attempt: int = 1
    ) -> dict[str, MaterialisedRequirement]:
        """The requirement inputs of a node, from the task's index (any attempt or rework)."""
        manifest = self.start()
        del attempt  # every attempt reads the same materialised copy
        plan: dict[str, Any] = manifest.body["plan"]
        return {
            e["input"]: self.requirements.named(e["requirement"])
            for e in plan["requirement_inputs"]
            if e["to"] == node_id
        }
