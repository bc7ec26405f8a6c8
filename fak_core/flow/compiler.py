"""The shared flow compiler: one deterministic normalisation used by preflight and runner.

Checks: unique node ids, input names and output names; every required input has exactly
one source and every source is a qualified reference (``node_id.output_name`` or
``requirement:name``) to something the flow declares; types and format contracts agree
along every edge; no dependency cycle; every rework target is strictly upstream of its
node; a prompt placeholder names one of the node's inputs and never smuggles in a
reference of its own (no implicit dependency edge). Edges come only from inputs.

The same flow always compiles to the same findings and the same plan.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fak_core.flow.findings import Finding
from fak_core.flow.model import Artifact, Flow, RequirementSpec

__all__ = ["CHECKS", "Compilation", "compile_flow", "parse_source", "placeholders"]

CHECKS = (
    "unique-node-ids",
    "unique-input-and-output-names",
    "one-legitimate-source-per-input",
    "qualified-references",
    "artifact-type-and-format-compatibility",
    "acyclic",
    "rework-targets-upstream",
    "no-implicit-dependencies",
)

_ID = r"[A-Za-z0-9_\-]+"
_NODE_REF = re.compile(rf"({_ID})\.({_ID})")
_REQ_REF = re.compile(r"requirement:([A-Za-z0-9_.\-]+)")
_PLACEHOLDER = re.compile(r"\{\{\s*([^{}\s]+)\s*\}\}")


def parse_source(text: str) -> tuple[str, str] | None:
    """``("node", "id.output")``-style split: ``(node_id, output)`` or ``("requirement:", name)``.

    Returns None for a reference that is not qualified.
    """
    m = _NODE_REF.fullmatch(text)
    if m:
        return m.group(1), m.group(2)
    m = _REQ_REF.fullmatch(text)
    if m:
        return "requirement:", m.group(1)
    return None


def placeholders(prompt: str) -> list[str]:
    """The distinct ``{{ name }}`` placeholders of a prompt, in order of first use."""
    seen: dict[str, None] = {}
    for m in _PLACEHOLDER.finditer(prompt):
        seen.setdefault(m.group(1), None)
    return list(seen)


@dataclass(frozen=True, slots=True)
class Compilation:
    """The compiler's answer: sorted findings, and the normalised plan when there are none."""

    findings: tuple[Finding, ...]
    plan: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        return not self.findings


def _closure(ids: Iterable[str], edges: set[tuple[str, str]]) -> dict[str, set[str]]:
    """For each id, the set of ids reachable through one or more edges."""
    succ: dict[str, set[str]] = {i: set() for i in ids}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)
        succ.setdefault(b, set())
    reach: dict[str, set[str]] = {}
    for start in succ:
        seen: set[str] = set()
        stack = list(succ[start])
        while stack:
            x = stack.pop()
            if x not in seen:
                seen.add(x)
                stack.extend(succ[x])
        reach[start] = seen
    return reach


def _topological(ids: list[str], edges: set[tuple[str, str]]) -> list[str]:
    indeg = dict.fromkeys(ids, 0)
    succ: dict[str, list[str]] = {i: [] for i in ids}
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    ready = [i for i in ids if indeg[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        x = heapq.heappop(ready)
        order.append(x)
        for y in sorted(succ[x]):
            indeg[y] -= 1
            if indeg[y] == 0:
                heapq.heappush(ready, y)
    return order


def compile_flow(flow: Flow) -> Compilation:
    """Check and normalise ``flow``; the result depends on nothing but the flow."""
    out: list[Finding] = []
    node_ids = [n.id for n in flow.nodes]
    first_index: dict[str, int] = {}
    for i, nid in enumerate(node_ids):
        if nid in first_index:
            out.append(
                Finding(
                    "DUPLICATE_NODE_ID",
                    f"nodes[{i}].id",
                    f"node id {nid!r} is already used by nodes[{first_index[nid]}]",
                )
            )
        else:
            first_index[nid] = i
    outputs: dict[str, dict[str, Artifact]] = {}
    for n in flow.nodes:
        table = outputs.setdefault(n.id, {})
        for a in n.outputs:
            table.setdefault(a.name, a)
    reqs: dict[str, RequirementSpec] = {}
    for r in flow.requirements:
        reqs.setdefault(r.name, r)

    edges: set[tuple[str, str]] = set()
    plan_edges: list[dict[str, str]] = []
    plan_reqs: list[dict[str, str]] = []
    for i, node in enumerate(flow.nodes):
        _unique(out, [a.name for a in node.outputs], f"nodes[{i}].outputs", "output")
        _unique(out, [x.name for x in node.inputs], f"nodes[{i}].inputs", "input")
        for j, inp in enumerate(node.inputs):
            base = f"nodes[{i}].inputs[{j}]"
            if not inp.sources and inp.required:
                out.append(
                    Finding("MISSING_SOURCE", base, f"required input {inp.name!r} has no source")
                )
            if len(inp.sources) > 1:
                out.append(
                    Finding(
                        "MULTIPLE_SOURCES",
                        base + ".sources",
                        f"input {inp.name!r} has {len(inp.sources)} sources; one is allowed",
                    )
                )
            for k, src in enumerate(inp.sources):
                path = f"{base}.sources[{k}]"
                parsed = parse_source(src)
                if parsed is None:
                    out.append(
                        Finding(
                            "UNQUALIFIED_REFERENCE",
                            path,
                            f"{src!r} is not node_id.output_name or requirement:name",
                        )
                    )
                    continue
                owner, name = parsed
                found: Artifact | RequirementSpec | None
                if owner == "requirement:":
                    found = reqs.get(name)
                    what = f"requirement {name!r}"
                else:
                    found = outputs.get(owner, {}).get(name)
                    what = f"output {name!r} of node {owner!r}"
                if found is None:
                    out.append(Finding("UNKNOWN_SOURCE", path, f"the flow declares no {what}"))
                    continue
                if owner == "requirement:":
                    plan_reqs.append({"requirement": name, "to": node.id, "input": inp.name})
                else:
                    edges.add((owner, node.id))
                    plan_edges.append(
                        {"from": owner, "output": name, "to": node.id, "input": inp.name}
                    )
                if inp.type != found.type:
                    out.append(
                        Finding(
                            "TYPE_MISMATCH",
                            path,
                            f"input {inp.name!r} expects {inp.type!r}; {what} is {found.type!r}",
                        )
                    )
                elif inp.format is not None and inp.format != found.format:
                    out.append(
                        Finding(
                            "FORMAT_MISMATCH",
                            path,
                            f"input {inp.name!r} expects format {inp.format!r}; "
                            f"{what} has {found.format!r}",
                        )
                    )
        names = {x.name for x in node.inputs}
        for ph in placeholders(node.prompt):
            if ph in names:
                continue
            if parse_source(ph) is not None:
                out.append(
                    Finding(
                        "IMPLICIT_DEPENDENCY",
                        f"nodes[{i}].prompt",
                        f"placeholder {{{{{ph}}}}} references {ph!r} directly; "
                        "only declared inputs may be used",
                    )
                )
            else:
                out.append(
                    Finding(
                        "UNKNOWN_PLACEHOLDER",
                        f"nodes[{i}].prompt",
                        f"placeholder {{{{{ph}}}}} names no input of this node",
                    )
                )

    reach = _closure(first_index, edges)
    for nid, i in first_index.items():
        if nid in reach[nid]:
            out.append(
                Finding(
                    "CYCLE", f"nodes[{i}]", f"node {nid!r} depends on itself through its inputs"
                )
            )
    rework: list[dict[str, str]] = []
    for i, node in enumerate(flow.nodes):
        for k, target in enumerate(node.rework_targets):
            path = f"nodes[{i}].rework_targets[{k}]"
            if target == node.id:
                msg = f"node {node.id!r} cannot name itself as a rework target"
            elif target not in first_index:
                msg = f"rework target {target!r} is not a node of this flow"
            elif node.id not in reach.get(target, set()):
                msg = f"rework target {target!r} is not upstream of node {node.id!r}"
            else:
                rework.append({"from": node.id, "to": target})
                continue
            out.append(Finding("ILLEGAL_REWORK_TARGET", path, msg))

    findings = tuple(sorted(set(out)))
    if findings:
        return Compilation(findings, None)
    plan = {
        "order": _topological(sorted(first_index), edges),
        "edges": sorted(plan_edges, key=lambda e: (e["to"], e["input"], e["from"], e["output"])),
        "requirement_inputs": sorted(plan_reqs, key=lambda e: (e["to"], e["input"])),
        "rework": sorted(rework, key=lambda e: (e["from"], e["to"])),
    }
    return Compilation((), plan)


def _unique(out: list[Finding], names: list[str], path: str, what: str) -> None:
    seen: set[str] = set()
    for j, name in enumerate(names):
        if name in seen:
            out.append(
                Finding(
                    f"DUPLICATE_{'ARTIFACT' if what == 'output' else 'INPUT'}",
                    f"{path}[{j}].name",
                    f"{what} name {name!r} is used twice in this node",
                )
            )
        seen.add(name)
