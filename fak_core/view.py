"""The per-decision view of a call: its arguments parsed at most once, lazily."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fak_core.calls import ToolCall
from fak_core.jsonargs import DEFAULT_MAX_ARGS_BYTES, DEFAULT_MAX_DEPTH, ArgsError, parse_args

__all__ = ["CallView"]

_UNPARSED: Any = object()


class CallView:
    """What every adjudicator sees: the call, and its arguments parsed on first use.

    ``args()`` is the parsed JSON object, or ``None`` when rung 0 would refuse them
    (``error`` then says why). Parsing happens once per decision, whoever asks first.
    """

    __slots__ = ("_args", "_settle", "call", "error", "max_bytes", "max_depth", "witnessed")

    def __init__(
        self,
        call: ToolCall,
        max_bytes: int = DEFAULT_MAX_ARGS_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        self.call = call
        self.max_bytes = max_bytes
        self.max_depth = max_depth
        self.error: ArgsError | None = None
        self._args: Any = _UNPARSED
        self._settle: list[Callable[[bool], None]] | None = None
        #: Set by the fold when it concludes REQUIRE_WITNESS: ``(opinions, after)``, every
        #: REQUIRE_WITNESS opinion and the fold of the others (None: nothing above ALLOW).
        self.witnessed: Any = None

    def on_settle(self, fn: Callable[[bool], None]) -> None:
        """Run ``fn(allowed)`` once the fold has concluded (to release reservations)."""
        if self._settle is None:
            self._settle = [fn]
        else:
            self._settle.append(fn)

    def settle(self, allowed: bool) -> None:
        """Called by the kernel after the fold; each callback runs once."""
        fns, self._settle = self._settle, None
        for fn in fns or ():
            fn(allowed)

    @property
    def tool(self) -> str:
        return self.call.tool

    @property
    def parsed(self) -> bool:
        """Whether the arguments were parsed already (by anyone)."""
        return self._args is not _UNPARSED

    def args(self) -> dict[str, Any] | None:
        a = self._args
        if a is _UNPARSED:
            try:
                a = parse_args(self.call.args, max_bytes=self.max_bytes, max_depth=self.max_depth)
            except ArgsError as exc:
                self.error = exc
                a = None
            self._args = a
        return a  # type: ignore[no-any-return]
