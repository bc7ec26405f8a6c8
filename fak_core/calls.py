"""The immutable tool-call and tool-result values the kernel decides over."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple

from fak_core.taint import Taint
from fak_core.verdicts import frozen_meta

__all__ = ["Result", "Status", "ToolCall"]

_EMPTY: Mapping[str, str] = MappingProxyType({})


class ToolCall(NamedTuple):
    """A proposed tool call.

    ``args`` is the raw JSON text the caller sent (``""`` counts as ``{}``); bytes are
    accepted so that invalid UTF-8 reaches rung 0 and is refused there. ``args_taint``
    defaults to TAINTED: only the host, never the wire, may mint anything better.
    ``meta`` is informational; no decision reads trust from it.
    """

    tool: str
    args: str | bytes = ""
    trace_id: str = ""
    principal: str = ""
    meta: Mapping[str, str] = _EMPTY
    args_taint: Taint = Taint.TAINTED
    seq: int = 0

    @staticmethod
    def make(
        tool: str,
        args: str | bytes = "",
        trace_id: str = "",
        principal: str = "",
        meta: Mapping[str, str] | None = None,
        args_taint: Taint = Taint.TAINTED,
        seq: int = 0,
    ) -> ToolCall:
        """Build a call with its metadata frozen (a read-only copy)."""
        return ToolCall(tool, args, trace_id, principal, frozen_meta(meta), args_taint, seq)

    def with_args(self, args: str | bytes) -> ToolCall:
        """The same call with other arguments (used to apply a TRANSFORM)."""
        return self._replace(args=args)

    def with_seq(self, seq: int) -> ToolCall:
        return self._replace(seq=seq)


class Status(StrEnum):
    """How a tool run ended."""

    OK = "OK"
    ERROR = "ERROR"
    PENDING = "PENDING"


class Result(NamedTuple):
    """A tool result: status, payload text and metadata.

    ``taint`` is the producer's claim about the payload; the kernel joins it with the
    tool's registered source, so a result can only become TRUSTED when both agree.
    Results built from wire bytes keep the default, TAINTED.
    """

    status: Status = Status.OK
    payload: str = ""
    meta: Mapping[str, str] = _EMPTY
    taint: Taint = Taint.TAINTED

    @staticmethod
    def make(
        status: Status = Status.OK,
        payload: str = "",
        meta: Mapping[str, str] | None = None,
        taint: Taint = Taint.TAINTED,
    ) -> Result:
        """Build a result with its metadata frozen (a read-only copy)."""
        return Result(status, payload, frozen_meta(meta), taint)
