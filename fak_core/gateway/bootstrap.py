"""Start-up for the gateway commands: load the policy and the user's tools into a kernel.

``--tools MODULE`` names an importable module (or a ``.py`` file) exposing
``TOOLS: dict[str, callable]`` and optionally ``SCHEMAS: dict[str, dict]`` (rung-1 JSON
Schemas) and ``SOURCES: dict[str, "trusted_local" | "untrusted"]`` (who authors trust; the
default is untrusted). Every problem raises :class:`BootstrapError` with what to fix.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from fak_core.gateway.state import GatewayState
from fak_core.kernel import Kernel
from fak_core.policy import Policy, PolicyError, default_policy, load_policy, policy_digest
from fak_core.provenance import Source
from fak_core.schemas import InvalidSchemaError

__all__ = [
    "BootstrapError",
    "build_state",
    "describe_policy",
    "enable_env_approvals",
    "load_tools_module",
    "manifest_policy",
]


class BootstrapError(Exception):
    """The gateway cannot start; the message says what to fix."""


def load_tools_module(spec: str) -> ModuleType:
    """Import ``spec`` as a module name, or load it from a ``.py`` path."""
    path = Path(spec)
    if spec.endswith(".py"):
        if not path.is_file():
            raise BootstrapError(f"--tools {spec}: no such file")
        mod_spec = importlib.util.spec_from_file_location(path.stem, path)
        if mod_spec is None or mod_spec.loader is None:
            raise BootstrapError(f"--tools {spec}: cannot load this file as a module")
        module = importlib.util.module_from_spec(mod_spec)
        try:
            mod_spec.loader.exec_module(module)
        except Exception as exc:
            raise BootstrapError(f"--tools {spec}: importing it raised {exc!r}") from exc
        return module
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(spec)
    except ImportError as exc:
        raise BootstrapError(
            f"--tools {spec}: cannot import it ({exc}); pass an importable module name "
            "or a path to a .py file"
        ) from exc
    except Exception as exc:
        raise BootstrapError(f"--tools {spec}: importing it raised {exc!r}") from exc


def _table(module: ModuleType, name: str, spec: str, required: bool) -> Mapping[str, Any]:
    value = getattr(module, name, None)
    if value is None:
        if required:
            raise BootstrapError(f"--tools {spec}: the module has no {name} dict")
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and k for k in value):
        raise BootstrapError(f"--tools {spec}: {name} must be a dict keyed by tool name")
    return value


def register_tools(kernel: Kernel, module: ModuleType, spec: str) -> list[str]:
    """Register the module's TOOLS (with SCHEMAS and SOURCES) into ``kernel``."""
    tools = _table(module, "TOOLS", spec, required=True)
    schemas = _table(module, "SCHEMAS", spec, required=False)
    sources = _table(module, "SOURCES", spec, required=False)
    for extra in (set(schemas) | set(sources)) - set(tools):
        raise BootstrapError(f"--tools {spec}: {extra!r} has a schema or source but no tool")
    for name, fn in tools.items():
        if not callable(fn):
            raise BootstrapError(f"--tools {spec}: TOOLS[{name!r}] is not callable")
        raw_source = sources.get(name, Source.UNTRUSTED)
        try:
            source = Source(raw_source)
        except ValueError:
            raise BootstrapError(
                f"--tools {spec}: SOURCES[{name!r}] = {raw_source!r} is not one of "
                f"{', '.join(s.value for s in Source)}"
            ) from None
        try:
            kernel.register_tool(name, fn, schema=schemas.get(name), source=source)
        except InvalidSchemaError as exc:
            raise BootstrapError(f"--tools {spec}: SCHEMAS[{name!r}] is invalid: {exc}") from exc
    return sorted(tools)


def manifest_policy(path: str, node: str | None) -> tuple[Policy, str]:
    """The kernel policy one node of a frozen manifest compiles to, and the manifest digest.

    The manifest is re-validated first (digest, compilation, no floating reference, no
    secret); a tampered one is refused with the runner's findings.
    """
    from fak_core.flow import ManifestError, kernel_policy_for, load_verified_manifest

    if not node:
        raise BootstrapError("--manifest needs --node ID: the node whose capability lock to run")
    try:
        manifest = load_verified_manifest(path)
    except ManifestError as exc:
        raise BootstrapError(f"--manifest {path}: refused: {exc}") from exc
    try:
        policy = kernel_policy_for(manifest, node)
    except KeyError:
        raise BootstrapError(f"--node {node}: the manifest has no node with that id") from None
    return policy, manifest.digest


def build_state(
    policy_path: str | None = None,
    tools: str | None = None,
    *,
    policy: Policy | None = None,
    kernel_options: Mapping[str, Any] | None = None,
    **state_options: Any,
) -> GatewayState:
    """A :class:`GatewayState` over a kernel with the policy (file, given or built-in), tools."""
    if policy is None:
        try:
            policy = load_policy(policy_path) if policy_path else default_policy()
        except PolicyError as exc:
            raise BootstrapError(str(exc)) from exc
    kernel = Kernel(policy, **(kernel_options or {}))
    enable_env_approvals(kernel)
    if tools:
        register_tools(kernel, load_tools_module(tools), tools)
    return GatewayState(kernel, **state_options)


def enable_env_approvals(kernel: Kernel) -> bool:
    """Accept ``fak approve`` tokens when ``FAK_APPROVAL_KEY`` is set (False when unset);
    a key too short to sign with is a :class:`BootstrapError` saying so."""
    try:
        return kernel.enable_approvals()
    except ValueError as exc:
        raise BootstrapError(str(exc)) from None


def describe_policy(state: GatewayState, policy_path: str | None) -> str:
    """``<path or "built-in"> sha256:<hex>`` for the start-up line."""
    return f"{policy_path or 'built-in'} {policy_digest(state.kernel.policy)}"
