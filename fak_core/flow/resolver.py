"""What preflight asks the world: the :class:`Resolver` interface and a file-backed workspace.

A resolver answers, at preflight time and under the current identity: who the user is
and what they are granted, which repositories and branches exist, where requirement
sources live (and their current revision), which capability versions exist now (with
their digests, whether they were withdrawn, which models they support), the workspace
budget and allowed models, and which private values (gateway addresses, credential
references, extension authentication, platform system prompts) must never leave it.

:class:`FileWorkspace` reads all of this from one workspace file (JSON, TOML or YAML).
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

from fak_core.flow.model import RISK_LEVELS, FlowSpecError, load_document
from fak_core.flow.refs import KINDS

__all__ = [
    "WORKSPACE_VERSION",
    "CapabilityInfo",
    "FileWorkspace",
    "Repository",
    "ResolvedRequirement",
    "Resolver",
    "User",
    "VersionInfo",
    "requirement_path",
]

WORKSPACE_VERSION = "fak-workspace/v1"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    grants: tuple[str, ...] = ()
    repositories: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ("*",)

    def granted(self, kind: str, name: str) -> bool:
        """Whether a grant pattern (``kind:name``, globs allowed) covers this capability."""
        return any(fnmatch.fnmatchcase(f"{kind}:{name}", g) for g in self.grants)


@dataclass(frozen=True, slots=True)
class Repository:
    url: str
    branches: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ResolvedRequirement:
    location: str
    revision: str


@dataclass(frozen=True, slots=True)
class VersionInfo:
    version: str
    digest: str
    withdrawn: bool = False
    models: tuple[str, ...] = ()
    risk: str | None = None
    schema: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class CapabilityInfo:
    kind: str
    name: str
    versions: dict[str, VersionInfo] = field(default_factory=dict)

    def by_digest(self, digest: str) -> VersionInfo | None:
        for v in self.versions.values():
            if v.digest == digest:
                return v
        return None


@runtime_checkable
class Resolver(Protocol):
    """Everything preflight needs to know about the world, asked at preflight time."""

    @property
    def name(self) -> str: ...

    def user(self, name: str) -> User | None: ...

    def repository(self, url: str) -> Repository | None: ...

    def requirement(self, location: str) -> ResolvedRequirement | None: ...

    def capability(self, kind: str, name: str) -> CapabilityInfo | None: ...

    def capabilities(self) -> tuple[CapabilityInfo, ...]: ...

    def budget(self) -> tuple[int, int]: ...

    def models(self) -> tuple[str, ...]: ...

    def private_values(self) -> tuple[str, ...]: ...


def requirement_path(root: Path, location: str) -> Path:
    """The local file a requirement location names: ``file://`` URI, absolute or relative."""
    if location.startswith("file://"):
        return Path(unquote(urlsplit(location).path))
    p = Path(location)
    return p if p.is_absolute() else root / p


_TOP = (
    "version", "name", "budget", "models", "repositories", "users", "capabilities", "platform",
)  # fmt: skip
_VERSION_KEYS = ("version", "digest", "withdrawn", "models", "risk", "schema")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class FileWorkspace:
    """A :class:`Resolver` backed by one workspace file; requirement paths are relative to it."""

    def __init__(self, doc: Any, origin: str = "workspace", root: Path | None = None) -> None:
        self.origin = origin
        self.root = root if root is not None else Path.cwd()
        self._parse(doc)

    @classmethod
    def load(cls, path: str | Path) -> FileWorkspace:
        p = Path(path)
        return cls(load_document(p), str(p), p.resolve().parent)

    def _fail(self, path: str, expected: str) -> FlowSpecError:
        return FlowSpecError(self.origin, path, expected)

    def _strs(self, doc: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
        value = doc.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self._fail(f"{path}.{key}" if path else key, "expected a list of strings")
        return tuple(value)

    def _table(self, value: Any, path: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self._fail(path, "expected a table/object")
        bad = [k for k in value if k not in allowed]
        if bad:
            where = f"{path}.{bad[0]}" if path else str(bad[0])
            raise self._fail(where, f"unknown key; valid keys: {', '.join(allowed)}")
        return value

    def _parse(self, doc: Any) -> None:
        top = self._table(doc, "", _TOP)
        version = top.get("version", WORKSPACE_VERSION)
        if version != WORKSPACE_VERSION:
            raise self._fail("version", f"expected {WORKSPACE_VERSION!r}")
        name = top.get("name")
        if not isinstance(name, str) or not name:
            raise self._fail("name", "expected the workspace name, a non-empty string")
        self._name = name
        budget = self._table(top.get("budget", {}), "budget", ("max_tokens", "max_runtime_s"))
        limits = []
        for key in ("max_tokens", "max_runtime_s"):
            v = budget.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise self._fail(f"budget.{key}", "expected a non-negative integer")
            limits.append(v)
        self._budget = (limits[0], limits[1])
        self._models = self._strs(top, "models", "")
        self._repos: dict[str, Repository] = {}
        repos = top.get("repositories", [])
        if not isinstance(repos, list):
            raise self._fail("repositories", "expected a list of {url, branches}")
        for i, raw in enumerate(repos):
            r = self._table(raw, f"repositories[{i}]", ("url", "branches"))
            url = r.get("url")
            if not isinstance(url, str) or not url:
                raise self._fail(f"repositories[{i}].url", "expected a repository URL")
            if url in self._repos:
                raise self._fail(f"repositories[{i}].url", f"duplicate repository {url!r}")
            self._repos[url] = Repository(url, self._strs(r, "branches", f"repositories[{i}]"))
        self._users: dict[str, User] = {}
        users = self._table(top.get("users", {}), "users", tuple(top.get("users", {}) or ()))
        for uname, raw in users.items():
            path = f"users.{uname}"
            u = self._table(raw, path, ("grants", "repositories", "requirements"))
            self._users[uname] = User(
                uname,
                self._strs(u, "grants", path),
                self._strs(u, "repositories", path),
                self._strs(u, "requirements", path) if "requirements" in u else ("*",),
            )
        self._private: list[str] = []
        platform = self._table(top.get("platform", {}), "platform", ("system_prompt", "gateway"))
        for key in ("system_prompt", "gateway"):
            if key in platform and not isinstance(platform[key], str):
                raise self._fail(f"platform.{key}", "expected a string")
            if platform.get(key):
                self._private.append(platform[key])
        self._caps: dict[tuple[str, str], CapabilityInfo] = {}
        caps = top.get("capabilities", [])
        if not isinstance(caps, list):
            raise self._fail("capabilities", "expected a list of capabilities")
        for i, raw in enumerate(caps):
            self._capability(raw, f"capabilities[{i}]")

    def _capability(self, raw: Any, path: str) -> None:
        c = self._table(raw, path, ("kind", "name", "versions", "gateway", "auth"))
        kind, name = c.get("kind"), c.get("name")
        if kind not in KINDS:
            raise self._fail(f"{path}.kind", f"expected one of {', '.join(KINDS)}")
        if not isinstance(name, str) or not name:
            raise self._fail(f"{path}.name", "expected a capability name")
        if (kind, name) in self._caps:
            raise self._fail(f"{path}.name", f"duplicate capability {kind}:{name}")
        if "gateway" in c and not isinstance(c["gateway"], str):
            raise self._fail(f"{path}.gateway", "expected a string")
        if c.get("gateway"):
            self._private.append(c["gateway"])
        self._private.extend(_strings(c.get("auth")))
        versions: dict[str, VersionInfo] = {}
        raw_versions = c.get("versions", [])
        if not isinstance(raw_versions, list):
            raise self._fail(f"{path}.versions", "expected a list of versions")
        for j, rv in enumerate(raw_versions):
            vp = f"{path}.versions[{j}]"
            v = self._table(rv, vp, _VERSION_KEYS)
            ver, dig = v.get("version"), v.get("digest")
            if not isinstance(ver, str) or not ver:
                raise self._fail(f"{vp}.version", "expected an exact version string")
            if ver in versions:
                raise self._fail(f"{vp}.version", f"duplicate version {ver!r}")
            if not isinstance(dig, str) or not _DIGEST.fullmatch(dig):
                raise self._fail(f"{vp}.digest", "expected sha256:<64 lowercase hex digits>")
            risk = v.get("risk")
            if risk is not None and risk not in RISK_LEVELS:
                raise self._fail(f"{vp}.risk", f"expected one of {', '.join(RISK_LEVELS)}")
            schema = v.get("schema")
            if schema is not None and not isinstance(schema, dict):
                raise self._fail(f"{vp}.schema", "expected a JSON Schema object")
            withdrawn = v.get("withdrawn", False)
            if not isinstance(withdrawn, bool):
                raise self._fail(f"{vp}.withdrawn", "expected true or false")
            versions[ver] = VersionInfo(
                ver, dig, withdrawn, self._strs(v, "models", vp), risk, schema
            )
        self._caps[(kind, name)] = CapabilityInfo(kind, name, versions)

    @property
    def name(self) -> str:
        return self._name

    def user(self, name: str) -> User | None:
        return self._users.get(name)

    def repository(self, url: str) -> Repository | None:
        return self._repos.get(url)

    def requirement(self, location: str) -> ResolvedRequirement | None:
        path = requirement_path(self.root, location)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        return ResolvedRequirement(location, "sha256:" + hashlib.sha256(data).hexdigest())

    def capability(self, kind: str, name: str) -> CapabilityInfo | None:
        return self._caps.get((kind, name))

    def capabilities(self) -> tuple[CapabilityInfo, ...]:
        return tuple(self._caps[k] for k in sorted(self._caps))

    def budget(self) -> tuple[int, int]:
        return self._budget

    def models(self) -> tuple[str, ...]:
        return self._models

    def private_values(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self._private))


def _strings(value: Any) -> list[str]:
    """Every string inside a nested value (the parts of an auth block that must stay private)."""
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
