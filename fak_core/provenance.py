"""Who authors trust: the kernel's source registry, never the caller or the model.

A tool is ``trusted_local`` (its results may be trusted) or ``untrusted`` (the default):
no tool is trusted unless the policy's ``sources`` table (or the host, registering the tool
it runs) names it, whatever its name says (a file is a classic injection carrier). Call
metadata is never consulted; :func:`claims_self_trust` only reports an attempt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

from fak_core.calls import Result, ToolCall
from fak_core.taint import Taint, join

__all__ = ["BUILTIN_TRUSTED", "Source", "SourceRegistry", "claims_self_trust"]


class Source(StrEnum):
    UNTRUSTED = "untrusted"
    TRUSTED_LOCAL = "trusted_local"


#: Local, read-only tools earlier versions trusted by default. They are untrusted unless the
#: policy names them (what they read may be anyone's text); kept so checks can name them.
BUILTIN_TRUSTED = ("Read", "Grep", "Glob", "LS", "NotebookRead", "read_file", "cat")


class SourceRegistry:
    """Tool name → source class; a tool nobody registered is untrusted (none is built in)."""

    __slots__ = ("_sources",)

    def __init__(self, sources: Mapping[str, Source | str] | None = None) -> None:
        self._sources: dict[str, Source] = {}
        for tool, src in (sources or {}).items():
            self.register(tool, src)

    def register(self, tool: str, source: Source | str) -> None:
        self._sources[tool] = Source(source)

    def source(self, tool: str) -> Source:
        return self._sources.get(tool, Source.UNTRUSTED)

    def trusted_tools(self) -> Iterable[str]:
        return sorted(t for t, s in self._sources.items() if s is Source.TRUSTED_LOCAL)

    def result_taint(self, call: ToolCall, result: Result, quarantined: bool) -> Taint:
        """The taint a result carries into its session.

        QUARANTINED if it was quarantined; otherwise the join of what its producer claims
        and the tool's source class, so TRUSTED needs both the producer (the kernel, for
        tools it ran) and the registry to agree. Wire results are minted TAINTED.
        """
        if quarantined:
            return Taint.QUARANTINED
        src = Taint.TRUSTED if self.source(call.tool) is Source.TRUSTED_LOCAL else Taint.TAINTED
        return join(result.taint, src)


def claims_self_trust(call: ToolCall) -> bool:
    """Whether the call's metadata tries to declare itself trusted (always ignored)."""
    for key, value in call.meta.items():
        k = key.lower()
        if ("provenance" in k or "trust" in k or "taint" in k) and "trust" in value.lower():
            return True
    return False
