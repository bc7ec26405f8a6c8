"""The taint lattice: Trusted < Tainted < Quarantined, joined by taking the higher."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["Taint", "join"]


class Taint(IntEnum):
    """How far a piece of data may be trusted. The numeric order is the lattice order."""

    TRUSTED = 0
    TAINTED = 1
    QUARANTINED = 2

    @property
    def label(self) -> str:
        """The lower-case wire name: ``trusted``, ``tainted`` or ``quarantined``."""
        return self.name.lower()


def join(a: Taint, b: Taint) -> Taint:
    """The least upper bound of two labels."""
    return a if a >= b else b
