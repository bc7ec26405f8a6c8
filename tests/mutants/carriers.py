"""Mutants of the carrier theorems (D10.4, D10.5, D10.6 in ``theorems/gateway.md``): each puts back
one way the proxies once let tool output, a tool use or a forged record past the kernel.

They patch the classification tables of ``fak_core.gateway.carriers`` (shared by both
proxies) or a proxy module's attribute, for the duration of a witness re-run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

from fak_core.gateway import anthropic_proxy, carriers, openai_proxy
from fak_core.gateway.carriers import ANTHROPIC_BLOCKS, OPENAI_ROLES, Carrier
from fak_core.gateway.turn import InboundResult
from pytest_fak import mutant

__all__: list[str] = []

_real_anthropic_inbound = anthropic_proxy.inbound_results
_real_apply = openai_proxy._apply
_real_screen_text = carriers.screen_text


# ------------------------------------------------------------------------------- D10.4
@mutant("D10.4/function-role-unadmitted")
def function_role_unadmitted() -> Any:
    """The regression: a legacy ``role: function`` result is forwarded but never admitted."""
    return mock.patch.dict(OPENAI_ROLES, {"function": Carrier.PLAIN})


@mutant("D10.4/provider-results-ignored")
def provider_results_ignored() -> Any:
    """The regression: only ``tool_result`` carries tool output; the results of tools the
    provider runs (web fetch, web search, code execution, MCP) are plain content."""
    plain = {
        t: Carrier.PLAIN
        for t, c in ANTHROPIC_BLOCKS.items()
        if c is Carrier.TOOL_OUTPUT and t != "tool_result"
    }
    return mock.patch.dict(ANTHROPIC_BLOCKS, plain)


@mutant("D10.4/assistant-results-skipped")
def assistant_results_skipped() -> Any:
    """The regression: tool output is admitted only in user turns, so a result placed in
    an assistant turn reaches the model unadmitted."""

    def inbound_results(
        messages: list[dict[str, Any]],
    ) -> list[tuple[dict[str, Any], InboundResult]]:
        users = [m if m.get("role") == "user" else {**m, "content": ""} for m in messages]
        return _real_anthropic_inbound(users)

    return mock.patch.object(anthropic_proxy, "inbound_results", inbound_results)


class _Permissive(dict[str, Carrier]):
    """A table that claims every block type, classifying the unknown ones as plain."""

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> Carrier:
        return Carrier.PLAIN

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return self[key]


@mutant("D10.4/unknown-blocks-pass")
def unknown_blocks_pass() -> Any:
    """Fail open: an Anthropic block type the gateway does not classify is forwarded as
    plain content instead of refused."""
    return mock.patch.object(anthropic_proxy, "ANTHROPIC_BLOCKS", _Permissive(ANTHROPIC_BLOCKS))


@mutant("D10.4/custom-result-unnamed")
def custom_result_unnamed() -> Any:
    """The regression: only a function call names its results; a result answering an
    OpenAI custom tool call is admitted under no tool name."""

    def function_only(tc: Any) -> str | None:
        fn = tc.get("function") if isinstance(tc, dict) else None
        if isinstance(fn, dict) and isinstance(tc.get("id"), str):
            return str(fn.get("name") or "")
        return None

    return mock.patch.object(openai_proxy, "call_name", function_only)


@mutant("D10.4/split-part-secret-passes")
def split_part_secret_passes() -> Any:
    """The regression: a tool result's parts are screened only as their JSON, so a secret
    split across two parts passes in halves."""

    def json_only(parts: Any, has_secret: Any = None, orders: Any = ()) -> str:
        return "\n".join(parts)

    return mock.patch.object(carriers, "joined_text", json_only)


# ------------------------------------------------------------------------------- D10.5
@mutant("D10.4/text-part-extras-unread")
def text_part_extras_unread() -> Any:
    """The bug found on the way: of a content list made of text parts only the text is
    screened, so a secret in a text part's extra field goes upstream unscreened."""

    def screen_text(content: Any) -> str:
        if isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            for p in content
        ):
            return "".join(p["text"] for p in content)
        return _real_screen_text(content)

    stack = contextlib.ExitStack()
    for module in (openai_proxy, anthropic_proxy):
        stack.enter_context(mock.patch.object(module, "screen_text", screen_text))
    return stack


@mutant("D10.5/server-tool-use-passes")
def server_tool_use_passes() -> Any:
    """The regression: the provider-run tool uses (``server_tool_use``, ``mcp_tool_use``)
    are relayed like text, unadjudicated, buffered and streamed."""
    return mock.patch.dict(
        ANTHROPIC_BLOCKS, {"server_tool_use": Carrier.PLAIN, "mcp_tool_use": Carrier.PLAIN}
    )


@mutant("D10.5/content-usage-dropped")
def content_usage_dropped() -> Any:
    """The regression: a usage the upstream puts on a chunk that carries choices is
    dropped; only a usage sent on a chunk of its own is relayed."""
    return mock.patch.object(
        openai_proxy.OpenAIProxy, "_hold_usage", staticmethod(lambda chunk, held: None)
    )


@mutant("D10.5/function-call-passes")
def function_call_passes() -> Any:
    """A legacy ``function_call`` the model proposes reaches the client whatever the kernel
    decided (buffered)."""

    def apply(choice: dict[str, Any], message: dict[str, Any], outcome: Any) -> None:
        legacy = message.get("function_call")
        _real_apply(choice, message, outcome)
        if legacy is not None:
            message["function_call"] = legacy

    return mock.patch.object(openai_proxy, "_apply", apply)


# ------------------------------------------------------------------------------- D10.6
@mutant("D10.6/upstream-fak-relayed")
def upstream_fak_relayed() -> Any:
    """The regression: a ``fak`` key the upstream writes is relayed to the client."""

    def keep(doc: Any, depth: int = 0) -> Any:
        return doc

    @contextlib.contextmanager
    def both() -> Iterator[None]:
        with (
            mock.patch.object(openai_proxy, "strip_fak", keep),
            mock.patch.object(anthropic_proxy, "strip_fak", keep),
        ):
            yield

    return both()
