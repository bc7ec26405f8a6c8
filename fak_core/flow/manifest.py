"""The execution manifest: freeze, digest, serialise, and compile a node's kernel policy.

The manifest body is the task's only execution configuration: repository URL and
baseline branch, every requirement source (location and pinned revision), the flow
policy, the frozen flow snapshot with its origin, the compiled plan, the exact
capability lock, the risk assessment and, per node, the final prompt, main agent
model, runtime configuration, skills, extensions, tools and sub-agents. The digest is
``sha256`` over the RFC 8785 canonical JSON of the whole body. The body is secret-free:
credential references stay in the private layer and the scanner refuses anything that
looks like a secret.

:func:`kernel_policy_for` turns a node's locked tools into a ``fak-policy/v1`` policy
whose floor allows exactly those tools and nothing built in.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fak_core.flow.canonical import CanonicalError, digest
from fak_core.flow.model import Flow, Node, RequirementSpec, flow_to_dict
from fak_core.flow.refs import CapabilityRef
from fak_core.policy import Policy, PolicyError, default_policy, parse_policy

__all__ = [
    "MANIFEST_FORMAT",
    "Manifest",
    "ManifestError",
    "build_body",
    "kernel_policy_for",
    "lock_entry_for",
    "node_entries",
    "requirement_entry",
]

MANIFEST_FORMAT = "fak-flow-manifest/v1"


class ManifestError(ValueError):
    """A manifest that cannot be used: malformed, tampered with, or failing re-validation."""

    def __init__(self, message: str, findings: Iterable[Any] = ()) -> None:
        super().__init__(message)
        self.findings = tuple(findings)


def lock_entry_for(
    lock: Iterable[Mapping[str, Any]], ref: CapabilityRef
) -> Mapping[str, Any] | None:
    """The lock entry an exact reference resolves to (by version or digest), if any."""
    for e in lock:
        if e.get("kind") != ref.kind or e.get("name") != ref.name:
            continue
        if ref.version is not None and e.get("version") == ref.version:
            return e
        if ref.digest is not None and e.get("digest") == ref.digest:
            return e
    return None


def _refs(refs: Iterable[CapabilityRef]) -> list[str]:
    return [str(r) for r in refs]


def _node_entry(node: Node, approval_required: bool) -> dict[str, Any]:
    return {
        "id": node.id,
        "prompt": node.prompt,
        "model": node.model,
        "runtime": node.runtime,
        "skills": _refs(node.skills),
        "extensions": _refs(node.extensions),
        "tools": _refs(node.tools),
        "subagents": [
            {
                "name": s.name,
                "inherits": list(s.inherits),
                "skills": _refs(s.skills),
                "tools": _refs(s.tools),
            }
            for s in node.subagents
        ],
        "approval_required": approval_required,
        "inputs": sorted(i.name for i in node.inputs),
        "outputs": sorted(a.name for a in node.outputs),
        "rework_targets": sorted(node.rework_targets),
    }


def node_entries(flow: Flow, order: list[str], risk: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per-node execution entries in plan order; approval comes from the persisted risk,
    and a node that asks for approval itself keeps it whatever the risk says."""
    approval = {n["node"]: bool(n["approval_required"]) for n in risk.get("nodes", [])}
    by_id = {n.id: n for n in flow.nodes}
    return [
        _node_entry(by_id[i], approval.get(i, True) or by_id[i].approval_required) for i in order
    ]


def requirement_entry(q: RequirementSpec, revision: Any) -> dict[str, Any]:
    """The manifest's entry for one requirement source, pinned at ``revision``."""
    item: dict[str, Any] = {
        "name": q.name,
        "location": q.location,
        "revision": revision,
        "type": q.type,
    }
    if q.format is not None:
        item["format"] = q.format
    return item


def build_body(
    *,
    task: Mapping[str, str],
    flow: Flow,
    origin: Mapping[str, Any],
    plan: Mapping[str, Any],
    lock: list[dict[str, Any]],
    risk: Mapping[str, Any],
    requirements: list[dict[str, Any]],
) -> dict[str, Any]:
    """The manifest body; the same inputs always give the same body (and digest)."""
    snapshot = flow_to_dict(flow, with_credentials=False)
    return {
        "format": MANIFEST_FORMAT,
        "task": dict(task),
        "repository": {"url": flow.repository, "baseline_branch": flow.baseline_branch},
        "requirements": requirements,
        "policy": snapshot["policy"],
        "snapshot": {"origin": dict(origin), "flow": snapshot},
        "plan": dict(plan),
        "lock": sorted(lock, key=lambda e: (e["kind"], e["name"], e["version"])),
        "risk": dict(risk),
        "nodes": node_entries(flow, list(plan["order"]), risk),
    }


@dataclass(frozen=True)
class Manifest:
    """A frozen manifest body and the digest recorded with it (not yet verified)."""

    body: dict[str, Any]
    digest: str

    @classmethod
    def seal(cls, body: dict[str, Any]) -> Manifest:
        """Compute the digest of ``body`` and pair them."""
        return cls(body, digest(body))

    def computed_digest(self) -> str:
        return digest(self.body)

    @property
    def node_ids(self) -> list[str]:
        return [n["id"] for n in self.body.get("nodes", [])]

    def node(self, node_id: str) -> dict[str, Any]:
        for n in self.body.get("nodes", []):
            if n.get("id") == node_id:
                return dict(n)
        raise KeyError(f"the manifest has no node {node_id!r}; nodes: {', '.join(self.node_ids)}")

    def to_json(self) -> str:
        doc = {"digest": self.digest, "manifest": self.body}
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, origin: str = "manifest") -> Manifest:
        try:
            doc = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ManifestError(f"{origin}: not a JSON manifest ({exc})") from None
        return cls.from_document(doc, origin)

    @classmethod
    def from_document(
        cls, doc: Any, origin: str = "manifest", *, canonical: bool = True
    ) -> Manifest:
        """A decoded manifest file, checked as :meth:`from_json` checks one (the same code);
        ``canonical=False`` leaves a body with no canonical form to ``revalidate``."""
        if not isinstance(doc, dict) or set(doc) != {"digest", "manifest"}:
            raise ManifestError(f"{origin}: expected an object with exactly digest and manifest")
        body, dig = doc["manifest"], doc["digest"]
        if not isinstance(body, dict) or not isinstance(dig, str):
            raise ManifestError(f"{origin}: manifest must be an object and digest a string")
        if body.get("format") != MANIFEST_FORMAT:
            raise ManifestError(f"{origin}: manifest.format: expected {MANIFEST_FORMAT!r}")
        if canonical:
            try:
                digest(body)
            except CanonicalError as exc:
                raise ManifestError(f"{origin}: {exc}") from None
        return cls(body, dig)


def kernel_policy_for(manifest: Manifest, node_id: str) -> Policy:
    """The kernel policy for one node: its locked tools (own and sub-agents') and nothing else.

    The floor allows exactly the node's locked tool names (no prefixes, no built-in
    tools, posture fail_closed); the restrictive parts of the default policy (deny map,
    self-modification globs, redaction, denied hosts, gated sinks) are kept; a tool whose
    locked version carries a JSON Schema gets it registered. Pass a verified manifest
    (see :func:`fak_core.flow.load_verified_manifest`).
    """
    node = manifest.node(node_id)
    lock = manifest.body.get("lock", [])
    names: set[str] = set()
    schemas: dict[str, Any] = {}
    tool_refs = [
        *node.get("tools", []),
        *(t for s in node.get("subagents", []) for t in s["tools"]),
    ]
    for text in tool_refs:
        ref_name, _, selector = str(text).partition("@")
        ref = CapabilityRef("tool", ref_name, selector or None)
        entry = lock_entry_for(lock, ref)
        if entry is None:
            raise ManifestError(f"node {node_id!r}: tool {text!r} is not in the capability lock")
        names.add(ref.name)
        if isinstance(entry.get("schema"), dict):
            schemas[ref.name] = entry["schema"]
    base = default_policy()
    doc = {
        "version": base.version,
        "posture": "fail_closed",
        "allow": sorted(names),
        "allow_prefix": [],
        "deny": dict(base.deny),  # a denied tool stays denied even when locked
        "self_modify_globs": list(base.self_modify_globs),
        "redact_fields": list(base.redact_fields),
        "secret_patterns": list(base.secret_patterns),
        "safe_sinks": [],
        "gated_sinks": list(base.gated_sinks),
        "deny_hosts": list(base.deny_hosts),
        "schemas": schemas,
    }
    try:
        return parse_policy(doc)
    except PolicyError as exc:
        raise ManifestError(
            f"node {node_id!r}: the lock does not compile to a policy: {exc}"
        ) from None
