"""The model upstream a proxy route forwards to: where it is, how to reach it, what it speaks.

:class:`UpstreamConfig` names the upstream (base URL, an optional pinned key, a timeout,
the wires it speaks, an optional in-process transport). :class:`Upstream` owns the
``httpx.AsyncClient`` and turns every transport or HTTP failure into an
:class:`UpstreamError` carrying the status the gateway answers with (502, 503 or 504,
or the upstream's own 4xx), so a route never passes a failed upstream turn through.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import orjson

__all__ = [
    "ANTHROPIC_VERSION",
    "WIRES",
    "Upstream",
    "UpstreamConfig",
    "UpstreamError",
    "Wire",
    "upstream_error_message",
]

Wire = Literal["openai", "anthropic"]
WIRES: tuple[Wire, ...] = ("openai", "anthropic")
ANTHROPIC_VERSION = "2023-06-01"

#: Wire → the path appended to the base URL.
_PATHS: dict[str, str] = {"openai": "/chat/completions", "anthropic": "/messages"}
#: Client headers relayed to the upstream (lower-case), besides the credential.
_RELAYED = {
    "openai": ("openai-organization", "openai-project"),
    "anthropic": ("anthropic-version", "anthropic-beta"),
}


class UpstreamError(Exception):
    """An upstream turn that failed: answer ``status`` with ``message`` (and ``code``)."""

    def __init__(self, status: int, message: str, code: str, upstream_status: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.upstream_status = upstream_status


@dataclass(frozen=True)
class UpstreamConfig:
    """Where the proxy routes send a model turn.

    ``base_url`` includes the API version prefix (``https://api.openai.com/v1``,
    ``https://api.anthropic.com/v1``). ``api_key`` pins the credential sent upstream;
    without it the client's own credential is forwarded. ``wires`` lists the wire formats
    the upstream accepts; a route whose wire is not listed refuses with 501. ``transport``
    replaces the network (an ``httpx.ASGITransport`` for an in-process upstream).
    """

    base_url: str
    api_key: str | None = None
    timeout: float = 60.0
    wires: tuple[Wire, ...] = WIRES
    transport: httpx.AsyncBaseTransport | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url.startswith(
            ("http://", "https://")
        ):
            raise ValueError(f"upstream base_url must be an http(s) URL, got {self.base_url!r}")
        if not self.timeout > 0:
            raise ValueError(f"upstream timeout must be > 0 seconds, got {self.timeout!r}")
        bad = [w for w in self.wires if w not in WIRES]
        if bad or not self.wires:
            raise ValueError(f"upstream wires must be a non-empty subset of {WIRES}, got {bad}")

    def speaks(self, wire: Wire) -> bool:
        return wire in self.wires


def upstream_error_message(body: bytes) -> str:
    """The human message inside an upstream error body (either wire's envelope), or ''."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:200].decode("utf-8", "replace").strip()
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
    return ""


def _status_error(status: int, body: bytes) -> UpstreamError:
    detail = upstream_error_message(body)
    suffix = f": {detail}" if detail else ""
    if status in (401, 403):
        return UpstreamError(
            status, f"upstream rejected the credentials{suffix}", "upstream_auth", status
        )
    if status == 429:
        return UpstreamError(429, f"upstream rate limit{suffix}", "upstream_rate_limited", status)
    if status in (503, 529):
        return UpstreamError(503, f"upstream overloaded{suffix}", "upstream_unavailable", status)
    if status == 504:
        return UpstreamError(504, f"upstream timed out{suffix}", "upstream_timeout", status)
    if status >= 500:
        return UpstreamError(
            502, f"upstream model error (HTTP {status}){suffix}", "upstream_error", status
        )
    return UpstreamError(
        status if 400 <= status < 500 else 502,
        f"upstream refused the request (HTTP {status}){suffix}",
        "upstream_rejected",
        status,
    )


def transport_error(exc: Exception) -> UpstreamError:
    """Map an ``httpx`` failure onto the gateway's answer."""
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamError(504, f"upstream timed out: {type(exc).__name__}", "upstream_timeout")
    if isinstance(exc, httpx.ConnectError):
        return UpstreamError(502, f"upstream unreachable: {exc}", "upstream_unreachable")
    if isinstance(exc, httpx.HTTPError):
        return UpstreamError(
            502, f"upstream connection failed: {type(exc).__name__}: {exc}", "upstream_error"
        )
    return UpstreamError(502, f"upstream failure: {type(exc).__name__}: {exc}", "upstream_error")


class Upstream:
    """One configured upstream; an ``httpx.AsyncClient`` per event loop, reused."""

    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]
        self._clients = weakref.WeakKeyDictionary()

    def client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        c = self._clients.get(loop)
        if c is None or c.is_closed:
            c = httpx.AsyncClient(
                base_url=self.config.base_url.rstrip("/"),
                timeout=httpx.Timeout(self.config.timeout),
                transport=self.config.transport,
                follow_redirects=False,
            )
            self._clients[loop] = c
        return c

    async def aclose(self) -> None:
        """Close the client of the running loop (others close with their loop)."""
        loop = asyncio.get_running_loop()
        c = self._clients.pop(loop, None)
        if c is not None:
            await c.aclose()

    def headers(self, wire: Wire, client_headers: Mapping[str, str]) -> dict[str, str]:
        """The headers sent upstream: the credential (pinned or the client's) and relays."""
        out = {"content-type": "application/json", "accept-encoding": "identity"}
        for name in _RELAYED[wire]:
            value = client_headers.get(name)
            if value:
                out[name] = value
        key = self.config.api_key
        if wire == "openai":
            if key:
                out["authorization"] = f"Bearer {key}"
            elif client_headers.get("authorization"):
                out["authorization"] = client_headers["authorization"]
        else:
            out.setdefault("anthropic-version", ANTHROPIC_VERSION)
            if key:
                out["x-api-key"] = key
            else:
                if client_headers.get("x-api-key"):
                    out["x-api-key"] = client_headers["x-api-key"]
                if client_headers.get("authorization"):
                    out["authorization"] = client_headers["authorization"]
        return out

    async def complete(
        self, wire: Wire, body: bytes, client_headers: Mapping[str, str]
    ) -> dict[str, Any]:
        """POST a non-streaming turn; the decoded JSON object, or :class:`UpstreamError`."""
        try:
            resp = await self.client().post(
                _PATHS[wire], content=body, headers=self.headers(wire, client_headers)
            )
        except httpx.HTTPError as exc:
            raise transport_error(exc) from exc
        if resp.status_code >= 400:
            raise _status_error(resp.status_code, resp.content)
        try:
            doc = orjson.loads(resp.content)
        except orjson.JSONDecodeError as exc:
            raise UpstreamError(
                502, f"upstream returned a body that is not JSON: {exc}", "upstream_malformed"
            ) from exc
        if not isinstance(doc, dict):
            raise UpstreamError(
                502, "upstream returned JSON that is not an object", "upstream_malformed"
            )
        return doc

    @asynccontextmanager
    async def stream(
        self, wire: Wire, body: bytes, client_headers: Mapping[str, str]
    ) -> AsyncIterator[httpx.Response]:
        """POST a streaming turn; yields the open response once it is a 2xx event stream."""
        client = self.client()
        req = client.build_request(
            "POST",
            _PATHS[wire],
            content=body,
            headers={**self.headers(wire, client_headers), "accept": "text/event-stream"},
        )
        try:
            resp = await client.send(req, stream=True)
        except httpx.HTTPError as exc:
            raise transport_error(exc) from exc
        try:
            if resp.status_code >= 400:
                try:
                    content = await resp.aread()
                except httpx.HTTPError as exc:
                    raise transport_error(exc) from exc
                raise _status_error(resp.status_code, content)
            ctype = resp.headers.get("content-type", "").partition(";")[0].strip()
            if ctype != "text/event-stream":
                raise UpstreamError(
                    502,
                    f"upstream answered a streaming request with {ctype or 'no content type'!r}"
                    ", not an event stream",
                    "upstream_malformed",
                )
            yield resp
        finally:
            await resp.aclose()
