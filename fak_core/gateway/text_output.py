"""The model's text on the proxies, policed in a tainted session (the gateway's half).

Per turn, :func:`text_policy` says whether the model's text is policed: the gateway's
``text_links`` setting is ``police`` (the default; ``fak serve --text-links off`` turns it
off) and the session is tainted when the upstream's answer is read. A policed turn
replaces each word of the text naming a destination the session's grounding does not
allow (:mod:`fak_core.textlinks`, the sink gate's reading and grounding) by a marker;
buffered through :meth:`TurnText.police`, streamed through :meth:`TurnText.stream`, which
holds a word back until it is decided. Each removal is journaled (event ``text_link``,
tool ``assistant_text``, verdict TRANSFORM, reason TRUST_VIOLATION, by ``gateway-text``,
the destination's digest) before the text that replaces it reaches the client, and
listed in the turn's ``fak`` record (``text_links``). A clean session's text is relayed
byte for byte.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any

import anyio

from fak_core.gateway.proxy_io import durable_stream
from fak_core.gateway.state import GatewayState
from fak_core.journal import JournalError
from fak_core.nonblocking import is_nonblocking
from fak_core.taint import Taint
from fak_core.textlinks import TextStream, marker, police_text

__all__ = ["TEXT_LINK_MODES", "TurnText", "record_removals", "text_policy"]

#: The values of the ``text_links`` setting: ``police`` (the default) and ``off``.
TEXT_LINK_MODES = ("police", "off")
BY = "gateway-text"


@dataclass
class TurnText:
    """One turn's text policing: which session, and what it removed."""

    state: GatewayState
    trace: str
    removed: list[str] = field(default_factory=list)
    _journaled: int = 0

    def _grounded(self, dest: str) -> bool:
        return self.state.kernel.grounding.grounded(self.trace, dest)

    @property
    def _inline(self) -> bool:
        return is_nonblocking(self.state.kernel.grounding)

    async def police(self, text: str) -> str:
        """A whole text, policed (a shared grounding store is asked off the event loop)."""
        if self._inline:
            out, removed = police_text(text, self._grounded)
        else:
            out, removed = await anyio.to_thread.run_sync(police_text, text, self._grounded)
        self._journal(removed)
        return out

    def stream(self) -> TextStream:
        """A stream of one text block or choice: feed it with :meth:`feed`."""
        return TextStream(self._grounded)

    async def feed(self, stream: TextStream, piece: str | None) -> str:
        """What of ``stream``'s text may go out after ``piece`` (None: the text ended);
        a removal is on record before the text that replaces it is returned."""
        step = stream.end if piece is None else functools.partial(stream.feed, piece)
        before = len(stream.removed)
        out = step() if self._inline else await anyio.to_thread.run_sync(step)
        removed = stream.removed[before:]
        if removed:
            self._journal(removed)
            await durable_stream(self.state)  # a failed journal ends the stream (503)
        return out

    def _journal(self, removed: list[str]) -> None:
        self.removed += removed
        journal = self.state.journal
        if journal is None:
            return
        for dest in removed:
            digest = hashlib.sha256(dest.encode("utf-8", "surrogatepass")).hexdigest()
            with contextlib.suppress(JournalError):  # a failed journal shows on durable()
                journal.record_fields(
                    {
                        "event": "text_link",
                        "trace": self.trace,
                        "tool": "assistant_text",
                        "args_digest": "sha256:" + digest,
                        "verdict": "TRANSFORM",
                        "reason": "TRUST_VIOLATION",
                        "by": BY,
                    }
                )

    def to_wire(self) -> list[dict[str, Any]]:
        """The turn's removals as its ``fak`` record lists them."""
        return [{"marker": marker(d), "by": BY} for d in self.removed]


def text_policy(state: GatewayState, trace: str) -> TurnText | None:
    """The turn's text policing, or None when its text goes out as the upstream wrote it
    (the setting is off, or the session is clean)."""
    if state.text_links == "off" or state.kernel.taint(trace) == Taint.TRUSTED:
        return None
    return TurnText(state, trace)


def record_removals(fak: dict[str, Any], policer: TurnText | None) -> dict[str, Any]:
    """The turn's ``fak`` record, with the text's removals listed under ``text_links``
    when it removed any."""
    if policer is not None and policer.removed:
        fak["text_links"] = policer.to_wire()
    return fak
