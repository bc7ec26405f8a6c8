"""The UI projection: each node's secret-free agent evidence, read only from the frozen manifest.

Per node: the main agent model and runtime configuration, the node prompt, sub-agent
names and what each inherits, the exact skill and extension (and tool) versions with
their digests, whether approval is required and the persisted risk. Nothing comes from
session text, directories or fixtures; platform system prompts are never shown, only a
note that a private execution layer exists. The result is scanned like the manifest.
"""

from __future__ import annotations

from typing import Any

from fak_core.flow.manifest import Manifest, ManifestError, lock_entry_for
from fak_core.flow.refs import CapabilityRef
from fak_core.flow.secretscan import scan

__all__ = ["PRIVATE_LAYER_NOTE", "project"]

PRIVATE_LAYER_NOTE = (
    "A private execution layer (platform system prompts, credentials, gateway and "
    "extension connections) also applies to this agent; it is not shown here."
)


def _exact(lock: list[dict[str, Any]], kind: str, refs: list[str]) -> list[dict[str, str]]:
    out = []
    for text in refs:
        name, _, selector = text.partition("@")
        entry = lock_entry_for(lock, CapabilityRef(kind, name, selector or None))
        if entry is None:
            raise ManifestError(f"{kind} {text!r} is not in the capability lock")
        out.append({"name": name, "version": entry["version"], "digest": entry["digest"]})
    return out


def project(manifest: Manifest) -> dict[str, Any]:
    """The task snapshot the UI shows, built only from ``manifest``; raises if not secret-free."""
    body = manifest.body
    lock = body.get("lock", [])
    risk = {n["node"]: n for n in body.get("risk", {}).get("nodes", [])}
    nodes = []
    for n in body.get("nodes", []):
        r = risk.get(n["id"], {})
        nodes.append(
            {
                "id": n["id"],
                "main_agent": {"model": n["model"], "runtime": n["runtime"]},
                "prompt": n["prompt"],
                "subagents": [
                    {
                        "name": s["name"],
                        "inherits": list(s["inherits"]),
                        "skills": _exact(lock, "skill", s["skills"]),
                        "tools": _exact(lock, "tool", s["tools"]),
                    }
                    for s in n["subagents"]
                ],
                "skills": _exact(lock, "skill", n["skills"]),
                "extensions": _exact(lock, "extension", n["extensions"]),
                "tools": _exact(lock, "tool", n["tools"]),
                "approval_required": n["approval_required"],
                "risk": {"level": r.get("level"), "confidence": r.get("confidence")},
                "private_execution_layer": PRIVATE_LAYER_NOTE,
            }
        )
    view = {
        "task": body.get("task", {}),
        "digest": manifest.digest,
        "origin": body.get("snapshot", {}).get("origin", {}),
        "repository": body.get("repository", {}),
        "requirements": [
            {"name": q["name"], "location": q["location"], "revision": q["revision"]}
            for q in body.get("requirements", [])
        ],
        "risk": {
            k: body.get("risk", {}).get(k) for k in ("level", "confidence", "approval_required")
        },
        "nodes": nodes,
    }
    findings = scan(view, path="projection")
    if findings:
        raise ManifestError(f"the projection is not secret-free: {findings[0].path}", findings)
    return view
