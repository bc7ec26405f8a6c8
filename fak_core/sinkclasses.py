"""Sink classes: the names a policy may give to what a tool's call does to the world.

The built-in classes are EXEC, DESTRUCTIVE, EGRESS (the ones the name heuristics of
:mod:`fak_core.sinks` can find), SPEND (moves money) and CREDENTIAL (sets or reveals a
secret). A host extends the set per kernel (:meth:`SinkClassRegistry.register`); a policy
naming a class its registry does not know is refused at load. ``NONE`` is not a class:
in a tool declaration it says the tool is never a sink.
"""

from __future__ import annotations

__all__ = ["BUILTIN_SINK_CLASSES", "NOT_A_SINK", "SinkClassRegistry"]

BUILTIN_SINK_CLASSES = ("EXEC", "DESTRUCTIVE", "EGRESS", "SPEND", "CREDENTIAL")
#: The declared sink of a tool that is never a sink, whatever its arguments look like.
NOT_A_SINK = "NONE"


class SinkClassRegistry:
    """The sink class names one kernel (or one policy load) accepts."""

    __slots__ = ("_names",)

    def __init__(self) -> None:
        self._names: list[str] = list(BUILTIN_SINK_CLASSES)

    def register(self, name: str) -> str:
        """Add a sink class (UPPER_SNAKE_CASE, not taken, not ``NONE``); return its name."""
        if not name or not name.replace("_", "").isalnum() or name.upper() != name:
            raise ValueError(f"sink class {name!r} must be UPPER_SNAKE_CASE")
        if name == NOT_A_SINK or name in self._names:
            raise ValueError(f"sink class {name!r} is taken")
        self._names.append(name)
        return name

    def names(self) -> tuple[str, ...]:
        """Every class, built-in first, then extensions in registration order."""
        return tuple(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names
