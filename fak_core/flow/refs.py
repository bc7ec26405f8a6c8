"""Capability references: ``name@1.4.2`` or ``name@sha256:<hex>`` (exact), else floating.

A reference names a skill, an extension or a tool. Only an exact reference can be
re-authorised and locked; a floating one (``name``, ``name@latest``, any other tag or
range) is kept as written so preflight can reject it by name. Nothing here resolves it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KINDS", "CapabilityRef", "LockEntry", "RefError", "parse_ref"]

KINDS = ("skill", "extension", "tool")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
# SemVer 2.0.0 exactly (semver.org's grammar): ASCII digits, no leading zero in a numeric
# identifier, no empty identifier in the pre-release or the build metadata
_NUM = r"(?:0|[1-9][0-9]*)"
_PRE_ID = rf"(?:{_NUM}|[0-9]*[A-Za-z\-][0-9A-Za-z\-]*)"
_SEMVER = re.compile(
    rf"{_NUM}\.{_NUM}\.{_NUM}(?:-{_PRE_ID}(?:\.{_PRE_ID})*)?(?:\+[0-9A-Za-z\-]+(?:\.[0-9A-Za-z\-]+)*)?"
)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_TAG = re.compile(r"[A-Za-z0-9^~<>=*.+\-]+")


class RefError(ValueError):
    """A capability reference that is not even well-formed."""


@dataclass(frozen=True, order=True, slots=True)
class CapabilityRef:
    """A reference as written: ``kind``, ``name`` and the selector after ``@`` (or None)."""

    kind: str
    name: str
    selector: str | None = None

    @property
    def version(self) -> str | None:
        s = self.selector
        return s if s is not None and _SEMVER.fullmatch(s) else None

    @property
    def digest(self) -> str | None:
        s = self.selector
        return s if s is not None and _DIGEST.fullmatch(s) else None

    @property
    def exact(self) -> bool:
        return self.version is not None or self.digest is not None

    @property
    def floating(self) -> bool:
        return not self.exact

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"

    def __str__(self) -> str:
        return self.name if self.selector is None else f"{self.name}@{self.selector}"


@dataclass(frozen=True, order=True, slots=True)
class LockEntry:
    """One locked capability: exact version and content digest, both fixed at preflight."""

    kind: str
    name: str
    version: str
    digest: str

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def to_dict(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "name": self.name,
            "version": self.version,
            "digest": self.digest,
        }


def parse_ref(kind: str, text: str) -> CapabilityRef:
    """Parse ``text`` as a ``kind`` reference; raise :class:`RefError` if it is malformed."""
    if kind not in KINDS:
        raise RefError(f"unknown capability kind {kind!r}; expected one of {', '.join(KINDS)}")
    if not isinstance(text, str) or not text:
        raise RefError("expected a reference like name@1.4.2, name@sha256:<hex> or name")
    name, sep, selector = text.partition("@")
    if not _NAME.fullmatch(name):
        raise RefError(
            f"bad capability name {name!r}: letters, digits, '_', '.', '-' (not starting with one)"
        )
    if not sep:
        return CapabilityRef(kind, name, None)
    if "@" in selector or (not _TAG.fullmatch(selector) and not _DIGEST.fullmatch(selector)):
        raise RefError(f"bad selector {selector!r} in {text!r}: a version, digest or tag")
    return CapabilityRef(kind, name, selector)
