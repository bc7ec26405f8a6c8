"""Request and stream plumbing the proxy routes share: capped body reads, SSE framing.

Reading is capped at the gateway's body limit while the body arrives (an oversize body
is refused before it is buffered whole). Upstream event streams are parsed with
``httpx-sse``; transport failures mid-stream become :class:`UpstreamError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
from httpx_sse import EventSource, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from fak_core.gateway.middleware import content_length
from fak_core.gateway.state import GatewayState
from fak_core.gateway.upstream import UpstreamError, transport_error
from fak_core.journal import JournalError
from fak_core.jsondepth import JsonTooDeep, dumps, loads

__all__ = [
    "BodyTooLarge",
    "decode_json_object",
    "durable_stream",
    "json_response",
    "read_body",
    "sse_data",
    "sse_event",
    "upstream_events",
]


class BodyTooLarge(Exception):
    """The request body is over the gateway's limit (answer 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body is larger than {limit} bytes; send a smaller body")
        self.limit = limit


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refusing as soon as it grows past ``limit`` bytes (at once when its
    ``Content-Length`` says so; a value that is not ASCII digits declares no length, and the
    gateway's body cap answers it 400 before a route runs)."""
    declared = content_length(request.headers.get("content-length"))
    if declared is not None and declared > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def decode_json_object(body: bytes) -> dict[str, Any]:
    """Decode a request body that must be a JSON object; ``ValueError`` says what is wrong."""
    if not body.strip():
        raise ValueError("request body is empty; send a JSON object")
    try:
        doc = loads(body, what="request body")
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON body: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"request body must be a JSON object, not {type(doc).__name__}")
    return doc


def json_response(doc: dict[str, Any], headers: dict[str, str]) -> Response:
    """A 200 JSON response written by :func:`fak_core.jsondepth.dumps` (orjson, or an
    iterative writer for what orjson refuses), so no answer is lost to the encoder."""
    return Response(dumps(doc), media_type="application/json", headers=headers)


def sse_data(payload: Any) -> bytes:
    """One ``data:`` event (the OpenAI framing)."""
    text = payload if isinstance(payload, str) else dumps(payload).decode("utf-8")
    return f"data: {text}\n\n".encode()


def sse_event(event: str, payload: Any) -> bytes:
    """One named event (the Anthropic framing)."""
    return f"event: {event}\ndata: {dumps(payload).decode('utf-8')}\n\n".encode()


async def upstream_events(resp: httpx.Response) -> AsyncIterator[ServerSentEvent]:
    """The upstream's events; a transport failure mid-stream becomes :class:`UpstreamError`.

    An event cut off before its terminating blank line is never yielded.
    """
    source = EventSource(resp).aiter_sse()
    try:
        while True:
            try:
                event = await source.__anext__()
            except StopAsyncIteration:
                return
            except Exception as exc:  # the transport's failure, whichever library raised it
                raise transport_error(exc) from exc
            yield event
    finally:
        await source.aclose()


def event_json(event: ServerSentEvent, wire: str) -> dict[str, Any]:
    """An event's data as a JSON object, else :class:`UpstreamError` (502)."""
    try:
        doc = loads(event.data, what="upstream stream event")
    except JsonTooDeep as exc:
        raise UpstreamError(
            502, f"upstream {wire} stream sent an event that {exc}", "upstream_malformed"
        ) from None
    except orjson.JSONDecodeError as exc:
        raise UpstreamError(
            502,
            f"upstream {wire} stream sent an event that is not JSON: {exc}",
            "upstream_malformed",
        ) from None
    if not isinstance(doc, dict):
        raise UpstreamError(
            502, f"upstream {wire} stream sent an event that is not an object", "upstream_malformed"
        )
    return doc


async def durable_stream(state: GatewayState) -> None:
    """Wait for the journal before a stream's verdict-bearing tail; a failed journal ends
    the stream with an error event instead (503), so no unrecorded tool call is sent."""
    try:
        await state.durable()
    except JournalError as exc:
        raise UpstreamError(503, str(exc), "journal_unavailable") from None
