"""Verdict kinds, their fold ranks, and the immutable verdict value.

Ranks order restrictiveness (DESIGN §3.1): ALLOW 0 < DEFER 10 < INDETERMINATE 15 <
TRANSFORM 20 < QUARANTINE 30 < REQUIRE_WITNESS 40 < DENY 100. Extension kinds are
registered per kernel with a declared rank and fallback; an unknown kind ranks and
falls back as DENY.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType
from typing import NamedTuple

from fak_core.reasons import Reason

__all__ = [
    "CLAIM_MAX",
    "EXTENSION_KIND_MIN",
    "KindRegistry",
    "QuarantinePayload",
    "TransformPayload",
    "Verdict",
    "VerdictKind",
    "WitnessPayload",
    "frozen_meta",
]

#: The first code an extension verdict kind may take.
EXTENSION_KIND_MIN = 1024
#: Deny evidence and witness claims are cut to this many characters.
CLAIM_MAX = 256

_EMPTY: Mapping[str, str] = MappingProxyType({})


def frozen_meta(meta: Mapping[str, str] | None) -> Mapping[str, str]:
    """A read-only copy of string metadata (the shared empty mapping when there is none)."""
    if not meta:
        return _EMPTY
    return MappingProxyType({str(k): str(v) for k, v in meta.items()})


class VerdictKind(IntEnum):
    """The core verdict kinds. Their codes are wire-stable; their ranks are below."""

    ALLOW = 0
    DENY = 1
    TRANSFORM = 2
    QUARANTINE = 3
    REQUIRE_WITNESS = 4
    DEFER = 5
    INDETERMINATE = 6


_CORE_RANKS: dict[int, int] = {
    VerdictKind.ALLOW: 0,
    VerdictKind.DEFER: 10,
    VerdictKind.INDETERMINATE: 15,
    VerdictKind.TRANSFORM: 20,
    VerdictKind.QUARANTINE: 30,
    VerdictKind.REQUIRE_WITNESS: 40,
    VerdictKind.DENY: 100,
}
DENY_RANK = 100


class KindRegistry:
    """Ranks, fallbacks and names of verdict kinds: the core ones plus extensions.

    Each kernel owns one. An unknown kind ranks 100 and falls back to DENY (fail closed).
    """

    __slots__ = ("_fallback", "_names", "_ranks", "ranks")

    def __init__(self) -> None:
        self._ranks: dict[int, int] = dict(_CORE_RANKS)
        #: Kind → rank for every known kind, read-only and live (registrations show);
        #: unknown kinds rank as DENY. The fold reads it once per decision.
        self.ranks: Mapping[int, int] = MappingProxyType(self._ranks)
        self._fallback: dict[int, int] = {}
        self._names: dict[int, str] = {int(k): k.name for k in VerdictKind}

    def register(
        self, code: int, name: str, rank: int, fallback: VerdictKind = VerdictKind.DENY
    ) -> int:
        """Declare an extension kind with its fold rank and the core kind it degrades to.

        The name is UPPER_SNAKE_CASE like the core ones: it is what the wire carries, and
        an empty one would render as an unknown kind's ``KIND_<n>``."""
        if code < EXTENSION_KIND_MIN:
            raise ValueError(
                f"extension kind {name!r} needs a code >= {EXTENSION_KIND_MIN}, got {code}"
            )
        if not name or not name.replace("_", "").isalnum() or name.upper() != name:
            raise ValueError(f"verdict kind name {name!r} must be UPPER_SNAKE_CASE")
        if code in self._names:
            raise ValueError(f"verdict kind {code} is taken by {self._names[code]}")
        if name in self._names.values():
            raise ValueError(f"verdict kind name {name} is taken")
        if not 0 <= rank <= DENY_RANK:
            raise ValueError(f"rank of {name} must be within 0..{DENY_RANK}, got {rank}")
        if fallback not in (VerdictKind.DENY, VerdictKind.ALLOW, VerdictKind.DEFER):
            raise ValueError(f"fallback of {name} must be DENY, ALLOW or DEFER")
        self._ranks[code] = rank
        self._fallback[code] = int(fallback)
        self._names[code] = name
        return code

    def rank(self, kind: int) -> int:
        """Restrictiveness of a kind; 100 (as DENY) for anything unknown."""
        return self._ranks.get(kind, DENY_RANK)

    def fallback(self, kind: int) -> int:
        """The core kind an extension kind is executed as; DENY for every non-extension."""
        return self._fallback.get(kind, VerdictKind.DENY)

    def name(self, kind: int) -> str:
        """The kind's name; unknown kinds render as ``KIND_<n>``."""
        return self._names.get(kind) or f"KIND_{kind}"

    def known(self, kind: int) -> bool:
        return kind in self._names


class TransformPayload(NamedTuple):
    """TRANSFORM: the repaired arguments, as JSON text."""

    new_args: str


class WitnessPayload(NamedTuple):
    """REQUIRE_WITNESS: the claim to corroborate; on DENY: bounded evidence of the offence."""

    claim: str


class QuarantinePayload(NamedTuple):
    """QUARANTINE: whether the bytes were paged out to the quarantine store."""

    page_out: bool = True


Payload = TransformPayload | WitnessPayload | QuarantinePayload | None


class Verdict(NamedTuple):
    """An adjudication: kind, reason, who decided (``by``), a payload and metadata.

    Immutable. Build verdicts with the constructors below, which attach the payload that
    matches the kind and freeze the metadata.
    """

    kind: int
    reason: int = Reason.NONE
    by: str = ""
    payload: Payload = None
    meta: Mapping[str, str] = _EMPTY

    @property
    def claim(self) -> str:
        """The witness claim or deny evidence, else ``""``."""
        p = self.payload
        return p.claim if isinstance(p, WitnessPayload) else ""

    @property
    def repaired_args(self) -> str | None:
        """The repaired arguments of a TRANSFORM, else ``None``."""
        p = self.payload
        return p.new_args if isinstance(p, TransformPayload) else None

    # Constructors: the only places a payload is attached, so payloads match kinds.
    @staticmethod
    def allow(by: str, meta: Mapping[str, str] | None = None) -> Verdict:
        return Verdict(VerdictKind.ALLOW, Reason.NONE, by, None, frozen_meta(meta))

    @staticmethod
    def defer(by: str) -> Verdict:
        return Verdict(VerdictKind.DEFER, Reason.NONE, by)

    @staticmethod
    def indeterminate(by: str, meta: Mapping[str, str] | None = None) -> Verdict:
        return Verdict(VerdictKind.INDETERMINATE, Reason.NONE, by, None, frozen_meta(meta))

    @staticmethod
    def deny(
        reason: int, by: str, claim: str = "", meta: Mapping[str, str] | None = None
    ) -> Verdict:
        payload = WitnessPayload(claim[:CLAIM_MAX]) if claim else None
        return Verdict(VerdictKind.DENY, reason, by, payload, frozen_meta(meta))

    @staticmethod
    def transform(new_args: str, by: str, meta: Mapping[str, str] | None = None) -> Verdict:
        return Verdict(
            VerdictKind.TRANSFORM, Reason.NONE, by, TransformPayload(new_args), frozen_meta(meta)
        )

    @staticmethod
    def quarantine(
        reason: int, by: str, page_out: bool = True, meta: Mapping[str, str] | None = None
    ) -> Verdict:
        return Verdict(
            VerdictKind.QUARANTINE, reason, by, QuarantinePayload(page_out), frozen_meta(meta)
        )

    @staticmethod
    def require_witness(
        claim: str, by: str, reason: int = Reason.UNWITNESSED, meta: Mapping[str, str] | None = None
    ) -> Verdict:
        return Verdict(
            VerdictKind.REQUIRE_WITNESS,
            reason,
            by,
            WitnessPayload(claim[:CLAIM_MAX]),
            frozen_meta(meta),
        )
