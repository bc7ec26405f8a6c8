"""Reason codes, their names, and the disposition each one implies.

The core vocabulary is closed and append-only (a golden file in the tests pins it).
Extension reasons live at 1024 and above; ``EGRESS_BLOCK`` is the one built in.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

__all__ = [
    "EXTENSION_REASON_MIN",
    "Disposition",
    "Reason",
    "ReasonRegistry",
]

#: The first code an extension reason may take; 0..1023 belong to the core.
EXTENSION_REASON_MIN = 1024


class Reason(IntEnum):
    """Why a verdict is what it is. Codes 0..13 are the closed core; 1024 is built in."""

    NONE = 0
    DEFAULT_DENY = 1
    POLICY_BLOCK = 2
    SELF_MODIFY = 3
    LEASE_HELD = 4
    TRUST_VIOLATION = 5
    MALFORMED = 6
    MISROUTE = 7
    RATE_LIMITED = 8
    SECRET_EXFIL = 9
    UNWITNESSED = 10
    OVERSIZE = 11
    UNKNOWN_TOOL = 12
    RESULT_SECRET_DISCOVERED = 13
    EGRESS_BLOCK = 1024


class Disposition(StrEnum):
    """What the caller should do about a refusal."""

    RETRYABLE = "RETRYABLE"
    WAIT = "WAIT"
    ESCALATE = "ESCALATE"
    TERMINAL = "TERMINAL"


_DISPOSITIONS: dict[int, Disposition] = {
    Reason.MISROUTE: Disposition.RETRYABLE,
    Reason.MALFORMED: Disposition.RETRYABLE,
    Reason.RATE_LIMITED: Disposition.WAIT,
    Reason.LEASE_HELD: Disposition.WAIT,
    Reason.SELF_MODIFY: Disposition.ESCALATE,
    Reason.TRUST_VIOLATION: Disposition.ESCALATE,
}


class ReasonRegistry:
    """Names for reason codes: the core ones plus extensions registered on this instance.

    Each kernel owns one, so an extension registered on one kernel is invisible to another.
    """

    __slots__ = ("_by_code", "_by_name", "_dispositions")

    def __init__(self) -> None:
        self._by_code: dict[int, str] = {int(r): r.name for r in Reason}
        self._by_name: dict[str, int] = {r.name: int(r) for r in Reason}
        self._dispositions: dict[int, Disposition] = dict(_DISPOSITIONS)

    def register(
        self, code: int, name: str, disposition: Disposition = Disposition.TERMINAL
    ) -> int:
        """Add an extension reason. Codes below 1024 and reused codes or names are refused."""
        if code < EXTENSION_REASON_MIN:
            raise ValueError(
                f"extension reason {name!r} needs a code >= {EXTENSION_REASON_MIN}, got {code}"
            )
        if not name or not name.replace("_", "").isalnum() or name.upper() != name:
            raise ValueError(f"reason name {name!r} must be UPPER_SNAKE_CASE")
        if code in self._by_code:
            raise ValueError(f"reason code {code} is taken by {self._by_code[code]}")
        if name in self._by_name:
            raise ValueError(f"reason name {name} is taken by code {self._by_name[name]}")
        self._by_code[code] = name
        self._by_name[name] = code
        self._dispositions[code] = disposition
        return code

    def name(self, code: int) -> str:
        """The name of a code; an unregistered code renders as ``REASON_<n>``."""
        return self._by_code.get(code) or f"REASON_{code}"

    def code(self, name: str) -> int:
        """The code of a name; raises ``KeyError`` listing the valid names when unknown."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(
                f"unknown reason {name!r}; valid reasons: {', '.join(self.names())}"
            ) from None

    def names(self) -> list[str]:
        """Every refusal reason name (NONE excluded), core first, then extensions, by code."""
        return [self._by_code[c] for c in sorted(self._by_code) if c != Reason.NONE]

    def disposition(self, code: int) -> Disposition:
        """The disposition of a reason: RETRYABLE, WAIT, ESCALATE or (by default) TERMINAL."""
        return self._dispositions.get(code, Disposition.TERMINAL)
