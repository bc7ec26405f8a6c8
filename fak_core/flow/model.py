"""The flow specification (``fak-flow/v1``) and its strict loader (JSON, TOML or YAML).

A flow is a list of nodes; each node has a prompt, a main agent model, a runtime
configuration, capability references (skills, extensions, tools), sub-agents and what
they inherit, typed inputs whose sources are qualified references, typed outputs
(artifacts with a format contract) and rework targets. The flow names its repository,
baseline branch, requirement sources and policy (budget, rework limit, approval threshold).

The loader checks shape only and reports the file, the path inside it and what was
expected; semantic checks (sources, cycles, rework) belong to the compiler. Duplicate
node ids are kept as written so the compiler can report them.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fak_core.flow.refs import CapabilityRef, RefError, parse_ref

__all__ = [
    "FLOW_VERSION",
    "INHERITABLE",
    "RISK_LEVELS",
    "Artifact",
    "Flow",
    "FlowPolicy",
    "FlowSpecError",
    "InputSpec",
    "Node",
    "RequirementSpec",
    "SubAgent",
    "flow_from_dict",
    "flow_to_dict",
    "load_document",
    "load_flow",
]

FLOW_VERSION = "fak-flow/v1"
RISK_LEVELS = ("low", "medium", "high", "critical")
INHERITABLE = ("model", "runtime", "skills", "extensions", "tools")


class FlowSpecError(ValueError):
    """A flow (or workspace) document with the wrong shape: names file, path and expectation."""

    def __init__(self, origin: str, path: str, expected: str) -> None:
        self.origin, self.path, self.expected = origin, path, expected
        where = f"{origin}: {path}" if path else origin
        super().__init__(f"{where}: {expected}")


@dataclass(frozen=True, slots=True)
class InputSpec:
    name: str
    sources: tuple[str, ...]
    type: str
    format: str | None = None
    required: bool = True


@dataclass(frozen=True, slots=True)
class Artifact:
    name: str
    type: str
    format: str | None = None


@dataclass(frozen=True, slots=True)
class SubAgent:
    name: str
    inherits: tuple[str, ...] = ()
    skills: tuple[CapabilityRef, ...] = ()
    tools: tuple[CapabilityRef, ...] = ()


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    prompt: str
    model: str
    runtime: dict[str, Any] = field(default_factory=dict)
    skills: tuple[CapabilityRef, ...] = ()
    extensions: tuple[CapabilityRef, ...] = ()
    tools: tuple[CapabilityRef, ...] = ()
    subagents: tuple[SubAgent, ...] = ()
    approval_required: bool = False
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[Artifact, ...] = ()
    rework_targets: tuple[str, ...] = ()
    credentials: tuple[str, ...] = ()

    def capability_refs(self) -> tuple[CapabilityRef, ...]:
        """Every reference the node and its sub-agents name, in spec order."""
        own = (*self.skills, *self.extensions, *self.tools)
        return own + tuple(r for s in self.subagents for r in (*s.skills, *s.tools))


@dataclass(frozen=True, slots=True)
class RequirementSpec:
    name: str
    location: str
    type: str = "requirements"
    format: str | None = None


@dataclass(frozen=True, slots=True)
class FlowPolicy:
    budget_tokens: int
    budget_runtime_s: int
    max_rework: int = 2
    approval_threshold: str = "high"


@dataclass(frozen=True, slots=True)
class Flow:
    name: str
    repository: str
    baseline_branch: str
    policy: FlowPolicy
    nodes: tuple[Node, ...]
    requirements: tuple[RequirementSpec, ...] = ()
    version: str = FLOW_VERSION

    def node(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)


class _Doc:
    """Typed access into a decoded document that reports failures with their path."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, path: str, expected: str) -> FlowSpecError:
        return FlowSpecError(self.origin, path, expected)

    def table(
        self, value: Any, path: str, allowed: tuple[str, ...], required: tuple[str, ...]
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a table/object, got {_tname(value)}")
        for key in value:
            if not isinstance(key, str) or key not in allowed:
                raise self.fail(
                    _join(path, str(key)), f"unknown key; valid keys: {', '.join(allowed)}"
                )
        for key in required:
            if key not in value:
                raise self.fail(_join(path, key), "required key is missing")
        return value

    def text(self, value: Any, path: str, *, empty: bool = False) -> str:
        if not isinstance(value, str) or (not empty and not value.strip()):
            raise self.fail(path, f"expected a non-empty string, got {_show(value)}")
        return value

    def opt_text(self, doc: Mapping[str, Any], key: str, path: str) -> str | None:
        return None if doc.get(key) is None else self.text(doc[key], _join(path, key))

    def integer(self, value: Any, path: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise self.fail(path, f"expected a non-negative integer, got {_show(value)}")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {_show(value)}")
        return value

    def items(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {_tname(value)}")
        return value

    def texts(self, value: Any, path: str) -> tuple[str, ...]:
        return tuple(self.text(v, f"{path}[{i}]") for i, v in enumerate(self.items(value, path)))

    def refs(self, value: Any, path: str, kind: str) -> tuple[CapabilityRef, ...]:
        out = []
        for i, v in enumerate(self.items(value, path)):
            try:
                out.append(parse_ref(kind, v))
            except RefError as exc:
                raise self.fail(f"{path}[{i}]", str(exc)) from None
        return tuple(out)

    def json_value(self, value: Any, path: str) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, list):
            return [self.json_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            for k in value:
                if not isinstance(k, str):
                    raise self.fail(path, f"expected string keys, got {_show(k)}")
            return {k: self.json_value(v, _join(path, k)) for k, v in value.items()}
        raise self.fail(path, f"expected a JSON value, got {_tname(value)}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _tname(value: Any) -> str:
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_FLOW_KEYS = ("version", "name", "repository", "requirements", "policy", "nodes")
_NODE_KEYS = (
    "id", "prompt", "model", "runtime", "skills", "extensions", "tools", "subagents",
    "approval_required", "inputs", "outputs", "rework_targets", "credentials",
)  # fmt: skip
_INPUT_KEYS = ("name", "source", "sources", "type", "format", "required")


def _input(d: _Doc, raw: Any, path: str) -> InputSpec:
    doc = d.table(raw, path, _INPUT_KEYS, ("name", "type"))
    if "source" in doc and "sources" in doc:
        raise d.fail(path, "give either source (one reference) or sources (a list), not both")
    if "source" in doc:
        sources: tuple[str, ...] = (d.text(doc["source"], _join(path, "source")),)
    else:
        sources = d.texts(doc.get("sources", []), _join(path, "sources"))
    return InputSpec(
        name=d.text(doc["name"], _join(path, "name")),
        sources=sources,
        type=d.text(doc["type"], _join(path, "type")),
        format=d.opt_text(doc, "format", path),
        required=d.boolean(doc.get("required", True), _join(path, "required")),
    )


def _artifact(d: _Doc, raw: Any, path: str) -> Artifact:
    doc = d.table(raw, path, ("name", "type", "format"), ("name", "type"))
    return Artifact(
        d.text(doc["name"], _join(path, "name")),
        d.text(doc["type"], _join(path, "type")),
        d.opt_text(doc, "format", path),
    )


def _subagent(d: _Doc, raw: Any, path: str) -> SubAgent:
    doc = d.table(raw, path, ("name", "inherits", "skills", "tools"), ("name",))
    inherits = d.texts(doc.get("inherits", []), _join(path, "inherits"))
    for i, item in enumerate(inherits):
        if item not in INHERITABLE:
            raise d.fail(f"{path}.inherits[{i}]", f"expected one of {', '.join(INHERITABLE)}")
    return SubAgent(
        d.text(doc["name"], _join(path, "name")),
        inherits,
        d.refs(doc.get("skills", []), _join(path, "skills"), "skill"),
        d.refs(doc.get("tools", []), _join(path, "tools"), "tool"),
    )


def _node(d: _Doc, raw: Any, path: str) -> Node:
    doc = d.table(raw, path, _NODE_KEYS, ("id", "prompt", "model"))
    runtime = doc.get("runtime", {})
    if not isinstance(runtime, dict):  # any string keys; json_value refuses the others
        raise d.fail(_join(path, "runtime"), f"expected a table/object, got {_tname(runtime)}")
    for key in ("max_tokens", "timeout_s"):
        if key in runtime:
            d.integer(runtime[key], f"{path}.runtime.{key}")
    p = path
    return Node(
        id=d.text(doc["id"], _join(p, "id")),
        prompt=d.text(doc["prompt"], _join(p, "prompt")),
        model=d.text(doc["model"], _join(p, "model")),
        runtime=d.json_value(runtime, _join(p, "runtime")),
        skills=d.refs(doc.get("skills", []), _join(p, "skills"), "skill"),
        extensions=d.refs(doc.get("extensions", []), _join(p, "extensions"), "extension"),
        tools=d.refs(doc.get("tools", []), _join(p, "tools"), "tool"),
        subagents=tuple(
            _subagent(d, s, f"{p}.subagents[{i}]")
            for i, s in enumerate(d.items(doc.get("subagents", []), _join(p, "subagents")))
        ),
        approval_required=d.boolean(
            doc.get("approval_required", False), _join(p, "approval_required")
        ),
        inputs=tuple(
            _input(d, s, f"{p}.inputs[{i}]")
            for i, s in enumerate(d.items(doc.get("inputs", []), _join(p, "inputs")))
        ),
        outputs=tuple(
            _artifact(d, s, f"{p}.outputs[{i}]")
            for i, s in enumerate(d.items(doc.get("outputs", []), _join(p, "outputs")))
        ),
        rework_targets=d.texts(doc.get("rework_targets", []), _join(p, "rework_targets")),
        credentials=d.texts(doc.get("credentials", []), _join(p, "credentials")),
    )


def flow_from_dict(doc: Any, origin: str = "flow") -> Flow:
    """Build a :class:`Flow` from a decoded document; :class:`FlowSpecError` on a bad shape."""
    d = _Doc(origin)
    top = d.table(doc, "", _FLOW_KEYS, ("name", "repository", "policy", "nodes"))
    version = top.get("version", FLOW_VERSION)
    if version != FLOW_VERSION:
        raise d.fail("version", f"expected {FLOW_VERSION!r}, got {_show(version)}")
    repo = d.table(
        top["repository"], "repository", ("url", "baseline_branch"), ("url", "baseline_branch")
    )
    pol = d.table(
        top["policy"], "policy", ("budget", "max_rework", "approval_threshold"), ("budget",)
    )
    budget = d.table(
        pol["budget"],
        "policy.budget",
        ("max_tokens", "max_runtime_s"),
        ("max_tokens", "max_runtime_s"),
    )
    threshold = pol.get("approval_threshold", "high")
    if threshold not in RISK_LEVELS:
        raise d.fail("policy.approval_threshold", f"expected one of {', '.join(RISK_LEVELS)}")
    reqs = []
    for i, raw in enumerate(d.items(top.get("requirements", []), "requirements")):
        path = f"requirements[{i}]"
        r = d.table(raw, path, ("name", "location", "type", "format"), ("name", "location"))
        reqs.append(
            RequirementSpec(
                d.text(r["name"], _join(path, "name")),
                d.text(r["location"], _join(path, "location")),
                d.text(r.get("type", "requirements"), _join(path, "type")),
                d.opt_text(r, "format", path),
            )
        )
    nodes = d.items(top["nodes"], "nodes")
    if not nodes:
        raise d.fail("nodes", "expected at least one node")
    return Flow(
        name=d.text(top["name"], "name"),
        repository=d.text(repo["url"], "repository.url"),
        baseline_branch=d.text(repo["baseline_branch"], "repository.baseline_branch"),
        policy=FlowPolicy(
            budget_tokens=d.integer(budget["max_tokens"], "policy.budget.max_tokens"),
            budget_runtime_s=d.integer(budget["max_runtime_s"], "policy.budget.max_runtime_s"),
            max_rework=d.integer(pol.get("max_rework", 2), "policy.max_rework"),
            approval_threshold=threshold,
        ),
        nodes=tuple(_node(d, n, f"nodes[{i}]") for i, n in enumerate(nodes)),
        requirements=tuple(reqs),
        version=version,
    )


def _refs(refs: tuple[CapabilityRef, ...]) -> list[str]:
    return [str(r) for r in refs]


def flow_to_dict(flow: Flow, *, with_credentials: bool = True) -> dict[str, Any]:
    """The flow as a normalised document; ``flow_from_dict`` of it gives the same flow."""

    def opt(d: dict[str, Any], key: str, value: str | None) -> dict[str, Any]:
        if value is not None:
            d[key] = value
        return d

    nodes = []
    for n in flow.nodes:
        node: dict[str, Any] = {
            "id": n.id,
            "prompt": n.prompt,
            "model": n.model,
            "runtime": n.runtime,
            "skills": _refs(n.skills),
            "extensions": _refs(n.extensions),
            "tools": _refs(n.tools),
            "subagents": [
                {
                    "name": s.name,
                    "inherits": list(s.inherits),
                    "skills": _refs(s.skills),
                    "tools": _refs(s.tools),
                }
                for s in n.subagents
            ],
            "approval_required": n.approval_required,
            "inputs": [
                opt(
                    {
                        "name": i.name,
                        "sources": list(i.sources),
                        "type": i.type,
                        "required": i.required,
                    },
                    "format",
                    i.format,
                )
                for i in n.inputs
            ],
            "outputs": [
                opt({"name": a.name, "type": a.type}, "format", a.format) for a in n.outputs
            ],
            "rework_targets": list(n.rework_targets),
        }
        if with_credentials:
            node["credentials"] = list(n.credentials)
        nodes.append(node)
    return {
        "version": flow.version,
        "name": flow.name,
        "repository": {"url": flow.repository, "baseline_branch": flow.baseline_branch},
        "requirements": [
            opt({"name": r.name, "location": r.location, "type": r.type}, "format", r.format)
            for r in flow.requirements
        ],
        "policy": {
            "budget": {
                "max_tokens": flow.policy.budget_tokens,
                "max_runtime_s": flow.policy.budget_runtime_s,
            },
            "max_rework": flow.policy.max_rework,
            "approval_threshold": flow.policy.approval_threshold,
        },
        "nodes": nodes,
    }


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML that refuses duplicate keys instead of silently keeping the last one."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def load_document(path: str | Path) -> Any:
    """Read a JSON, TOML or YAML file (by suffix) into plain data; errors name the file."""
    p = Path(path)
    origin = str(p)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise FlowSpecError(origin, "", f"cannot read the file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise FlowSpecError(origin, "", "expected UTF-8 text") from None
    suffix = p.suffix.lower()
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise FlowSpecError(origin, "", f"expected valid TOML: {exc}") from None
    if suffix in (".yaml", ".yml"):
        try:
            return yaml.load(text, Loader=_StrictLoader)
        except yaml.YAMLError as exc:
            raise FlowSpecError(origin, "", f"expected valid YAML: {exc}") from None
    if suffix == ".json":
        try:
            return json.loads(text, object_pairs_hook=_no_duplicates)
        except json.JSONDecodeError as exc:
            raise FlowSpecError(
                origin, "", f"expected valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
            ) from None
        except ValueError as exc:
            raise FlowSpecError(origin, "", f"expected valid JSON ({exc})") from None
    raise FlowSpecError(origin, "", "expected a .json, .toml, .yaml or .yml file")


def load_flow(path: str | Path) -> Flow:
    """Load and shape-check a flow file."""
    return flow_from_dict(load_document(path), str(path))
