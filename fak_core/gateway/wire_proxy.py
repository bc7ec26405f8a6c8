"""The shape every proxied model turn has, whatever the wire: :class:`WireProxy`.

Read the body under the cap, decode and validate it, pick the trace, admit the inbound
tool results, then either relay a stream or complete the turn, adjudicate it and answer
once the decisions are durable. A wire (OpenAI, Anthropic) supplies only what differs:
its validator, where its tool results are, its error shapes, and how it adjudicates a
completed turn and relays a stream (``openai_proxy``, ``anthropic_proxy``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from fak_core.gateway.middleware import MINTED_KEY, header_value
from fak_core.gateway.proxy_io import (
    BodyTooLarge,
    decode_json_object,
    json_response,
    read_body,
)
from fak_core.gateway.sessions import OPERATOR_HEADER, SESSION_HEADER, SessionError
from fak_core.gateway.state import GatewayState, WireError
from fak_core.gateway.turn import InboundResult, admit_inbound
from fak_core.gateway.upstream import Upstream, UpstreamError, Wire
from fak_core.journal import JournalError
from fak_core.statedown import StateUnavailable

__all__ = ["WireProxy", "require_messages", "require_model", "tool_format_error"]


def require_model(doc: dict[str, Any]) -> None:
    """Refuse a request without a non-empty ``model`` string (both wires need one)."""
    model = doc.get("model")
    if not isinstance(model, str) or not model.strip():
        raise WireError("model: field required (a non-empty string)", "model")


def require_messages(doc: dict[str, Any]) -> list[Any]:
    """The request's ``messages``: a non-empty array, else :class:`WireError`."""
    messages = doc.get("messages")
    if not isinstance(messages, list) or not messages:
        raise WireError("messages: field required (a non-empty array of messages)", "messages")
    return messages


def tool_format_error(what: str, reason: str) -> UpstreamError:
    """A 502 for an upstream whose ``what`` (its tool calls) we cannot parse: nothing it
    proposed may skip adjudication."""
    return UpstreamError(
        502,
        f"upstream {what} format not recognized ({reason}); refusing to skip adjudication",
        "upstream_tool_format",
    )


class WireProxy:
    """One proxy route bound to one gateway state and one upstream; subclass per wire."""

    #: The wire this route speaks, and the route a turn in the other wire belongs on.
    wire: ClassVar[Wire]
    wire_name: ClassVar[str]
    other_route: ClassVar[str]

    def __init__(self, state: GatewayState, upstream: Upstream) -> None:
        self.state = state
        self.upstream = upstream

    # What a wire supplies ----------------------------------------------------------
    def error(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        """An error response in this wire's own envelope."""
        raise NotImplementedError

    def error_frame(self, exc: UpstreamError) -> bytes:
        """The event that ends a stream already under way with this failure."""
        raise NotImplementedError

    def validate(self, doc: dict[str, Any]) -> None:
        """Refuse (:class:`WireError`) a request this wire's proxy cannot forward."""
        raise NotImplementedError

    def inbound(self, doc: dict[str, Any]) -> list[tuple[dict[str, Any], InboundResult]]:
        """The turn's inbound tool results, each with the object that holds its content."""
        raise NotImplementedError

    def user_words(self, doc: dict[str, Any]) -> list[tuple[str, str]]:
        """``(origin, text)`` the user and the system wrote in this turn (trusted context)."""
        return []

    async def complete_turn(
        self, doc: dict[str, Any], trace: str, results: list[InboundResult]
    ) -> dict[str, Any]:
        """Adjudicate a completed upstream turn; the body the client receives."""
        raise NotImplementedError

    def relay(
        self,
        body: bytes,
        client_headers: dict[str, str],
        trace: str,
        results: list[InboundResult],
    ) -> AsyncGenerator[bytes, None]:
        """The client's event stream: text as it comes, tool calls once adjudicated."""
        raise NotImplementedError

    # The turn ---------------------------------------------------------------------
    async def handle(self, request: Request) -> Response:
        state = self.state
        try:
            raw = await read_body(request, state.max_body)
        except BodyTooLarge as exc:
            return self.error(413, str(exc), code="body_too_large")
        try:
            doc = decode_json_object(raw)
            self.validate(doc)
        except WireError as exc:
            return self.error(400, exc.message, param=exc.param)
        except ValueError as exc:
            return self.error(400, str(exc))
        try:
            trace = state.trace_for(None, request.headers.get("x-trace-id"))
        except WireError as exc:
            return self.error(400, exc.message, param=exc.param)
        headers = {"x-trace-id": header_value(trace)}
        try:
            # the turn may record the user's words (grounding): only the trace's owner (or
            # the operator) may act in it, so its token is checked before anything else
            token = state.sessions.claim(
                trace,
                request.headers.get(SESSION_HEADER),
                fresh=request.scope.get(MINTED_KEY) == trace,
                operator=request.headers.get(OPERATOR_HEADER),
            )
        except SessionError as exc:
            return self.error(exc.status, exc.message, param="trace_id", headers=headers)
        except StateUnavailable as exc:
            return self.error(503, str(exc), code="state_unavailable", headers=headers)
        if token is not None:
            headers["x-fak-session"] = token
        if not self.upstream.config.speaks(self.wire):
            return self.error(
                501,
                f"the configured upstream does not speak the {self.wire_name} wire; "
                f"send this turn to {self.other_route} instead",
                code="wire_not_supported",
                headers=headers,
            )
        if state.kernel.grounds_destinations:
            # the user's and system's own words ground destinations (policy v2). With the
            # shared state down they are not recorded: that grounds less (fail-closed), the
            # turn's decisions are refused STATE_DOWN meanwhile, and the next turn, which
            # carries the same words, records them
            with contextlib.suppress(StateUnavailable):
                await state.record_trusted(trace, self.user_words(doc))
        inbound = self.inbound(doc)
        too_many = state.refuse_tool_results(len(inbound))
        if too_many is not None:
            return self.error(413, too_many, code="too_many_tool_results", headers=headers)
        # never raises: an admission that fails is the result's quarantine stub
        results, body = await admit_inbound(state, doc, inbound, trace, raw)
        refused = state.journal_refusal()  # the turn's rows were over its share: no upstream
        if refused is not None:
            return self.error(503, refused, code="journal_unavailable", headers=headers)
        client_headers = {k.lower(): v for k, v in request.headers.items()}
        if doc.get("stream") is True:
            return await self._stream(body, client_headers, trace, results, headers)
        try:
            upstream_doc = await self.upstream.complete(self.wire, body, client_headers)
            out = await self.complete_turn(upstream_doc, trace, results)
            await state.durable()  # no decision reaches the client before it is journaled
        except JournalError as exc:
            return self.error(503, str(exc), code="journal_unavailable", headers=headers)
        except UpstreamError as exc:
            return self.error(exc.status, exc.message, code=exc.code, headers=headers)
        return json_response(out, headers)

    async def _stream(
        self,
        body: bytes,
        client_headers: dict[str, str],
        trace: str,
        results: list[InboundResult],
        headers: dict[str, str],
    ) -> Response:
        """A failure before the first event is an ordinary error response; one after it
        ends the stream with this wire's error event."""
        gen = self.relay(body, client_headers, trace, results)
        try:
            first = await gen.__anext__()
        except UpstreamError as exc:
            await gen.aclose()
            return self.error(exc.status, exc.message, code=exc.code, headers=headers)

        async def stream() -> AsyncIterator[bytes]:
            yield first
            try:
                async for piece in gen:
                    yield piece
            except UpstreamError as exc:
                yield self.error_frame(exc)
            finally:
                await gen.aclose()

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={**headers, "cache-control": "no-cache"},
        )
