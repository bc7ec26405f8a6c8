"""The per-decision view of a call: its arguments parsed at most once, lazily."""

from __future__ import annotations

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

    __slots__ = ("_args", "call", "error", "max_bytes", "max_depth")

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
