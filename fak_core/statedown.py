"""The refusal of a decision whose shared session state cannot be reached or trusted.

Kept apart from :mod:`fak_core.redis_state` so that the kernel and the gateway can name
it without importing a Redis client (an optional extra).
"""

from __future__ import annotations

from fak_core.reasons import Disposition, ReasonRegistry

__all__ = ["STATE_DOWN", "StateUnavailable", "register_state_down"]

#: The extension reason of a refusal because the shared state cannot be reached or trusted.
STATE_DOWN = 1910


class StateUnavailable(RuntimeError):
    """The shared state cannot be read or written: a refusal, DENY/STATE_DOWN."""

    #: The fold keeps this reason when an adjudicator raises this exception.
    deny_reason = STATE_DOWN


def register_state_down(reasons: ReasonRegistry) -> None:
    """Name :data:`STATE_DOWN` on a kernel's reason registry (once); disposition WAIT:
    the same call may pass once the shared state is back."""
    if reasons.name(STATE_DOWN) != "STATE_DOWN":
        reasons.register(STATE_DOWN, "STATE_DOWN", Disposition.WAIT)
