"""The model upstream a proxy route forwards to: where it is, how to reach it, what it speaks.

:class:`UpstreamConfig` names the upstream (base URL, an optional pinned key, a timeout,
the wires it speaks, an optional ``httpx`` transport). :class:`Upstream` sends each turn
through that transport (by default :func:`default_transport`) and turns every transport or
HTTP failure into an :class:`UpstreamError` carrying the status the gateway answers with
(502, 503 or 504, or the upstream's own 4xx), so a route never passes a failed upstream
turn through.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.request
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
import httpx
import orjson
from httpx_aiohttp import AiohttpTransport

from fak_core.jsondepth import JsonTooDeep, loads

__all__ = [
    "ANTHROPIC_VERSION",
    "WIRES",
    "Upstream",
    "UpstreamConfig",
    "UpstreamError",
    "Wire",
    "default_transport",
    "env_proxy",
    "transport_error",
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
    #: Client headers (lower-case) relayed upstream as they are, e.g. ``authorization``
    #: when clients bring their own provider key (``fak serve --forward-header``). No
    #: client credential is relayed otherwise: the client's gateway key stays here.
    forward_headers: tuple[str, ...] = ()
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
    """The gateway's answer to an upstream error status (400 or more) and its body."""
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
    # every other status here is a 4xx: the callers pass only 400 and up
    return UpstreamError(
        status, f"upstream refused the request (HTTP {status}){suffix}", "upstream_rejected", status
    )


def transport_error(exc: BaseException) -> UpstreamError:
    """Map a transport failure onto the gateway's answer: 504 for a timeout, else 502."""
    cause = exc.__cause__
    # httpx-aiohttp reports every aiohttp connection error as ConnectTimeout; only a cause
    # that is a timeout is one. Refused or reset connections are 502s.
    if (
        isinstance(exc, httpx.ConnectTimeout)
        and cause is not None
        and not isinstance(cause, TimeoutError)
    ):
        return _connection_error(cause)
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return UpstreamError(504, f"upstream timed out: {type(exc).__name__}", "upstream_timeout")
    if isinstance(exc, httpx.ConnectError):
        return UpstreamError(502, f"upstream unreachable: {exc}", "upstream_unreachable")
    return _connection_error(exc)


def _connection_error(exc: BaseException) -> UpstreamError:
    if isinstance(exc, ConnectionRefusedError | aiohttp.ClientConnectorError):
        return UpstreamError(502, f"upstream unreachable: {exc}", "upstream_unreachable")
    return UpstreamError(
        502, f"upstream connection failed: {type(exc).__name__}: {exc}", "upstream_error"
    )


def env_proxy(url: httpx.URL) -> httpx.Proxy | None:
    """The proxy ``HTTP_PROXY`` / ``HTTPS_PROXY`` name for ``url``, unless ``NO_PROXY``
    exempts its host (read once per upstream, not once per request)."""
    proxies = urllib.request.getproxies_environment()
    if not proxies or (url.host and urllib.request.proxy_bypass(url.host)):
        return None
    value = proxies.get(url.scheme)
    return httpx.Proxy(value) if value else None


def default_transport(url: httpx.URL | None = None) -> httpx.AsyncBaseTransport:
    """The transport an upstream uses unless its config names one: ``httpx-aiohttp``'s
    :class:`~httpx_aiohttp.AiohttpTransport` (aiohttp's HTTP/1.1 client behind httpx's
    transport interface, the one the official OpenAI SDK offers for speed), with httpx's
    certificate store, and the environment's proxy for ``url`` (:func:`env_proxy`). On
    loopback it spends about half of what httpx's own transport does per turn
    (``benchmarks/proxy.py``). Create it on the event loop that will use it."""
    # An idle connection is dropped after 4 s: sooner than the 5 s after which uvicorn (and
    # so many model servers) close one, so a turn is never sent on a closing connection.
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=4.0)
    ssl_context = httpx.create_ssl_context()

    def session() -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            ssl=ssl_context, limit=100, keepalive_timeout=limits.keepalive_expiry
        )
        # No cookie jar: a cookie one client's turn set must never ride on another's.
        # trust_env stays off: aiohttp would read the environment and ~/.netrc on a worker
        # thread for every request; the proxy is resolved once instead.
        return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())

    proxy = env_proxy(url) if url is not None else None
    return AiohttpTransport(limits=limits, proxy=proxy, client=session)


class Upstream:
    """One configured upstream: the configured transport, else :func:`default_transport`
    (one per event loop, reused).

    Requests go straight to the transport, not through an ``httpx.AsyncClient``: a proxy
    must not keep the cookies one client's turn set and send them on another's, and
    nothing else a client layer adds (auth flows, redirects, hooks) applies here.
    """

    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        base = config.base_url.rstrip("/")
        self._urls = {wire: httpx.URL(base + path) for wire, path in _PATHS.items()}
        self._timeout = httpx.Timeout(config.timeout).as_dict()
        self._transports: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, httpx.AsyncBaseTransport
        ] = weakref.WeakKeyDictionary()

    def transport(self) -> httpx.AsyncBaseTransport:
        """The configured transport, else this event loop's default one."""
        if self.config.transport is not None:
            return self.config.transport
        loop = asyncio.get_running_loop()
        t = self._transports.get(loop)
        if t is None:
            t = self._transports[loop] = default_transport(self._urls["openai"])
        return t

    async def aclose(self) -> None:
        """Close the default transport of the running loop (others close with their loop;
        a transport passed in the config belongs to the caller, who closes it)."""
        t = self._transports.pop(asyncio.get_running_loop(), None)
        if t is not None:
            await t.aclose()

    def headers(self, wire: Wire, client_headers: Mapping[str, str]) -> dict[str, str]:
        """The headers sent upstream: the pinned credential, the wire's relays, and the
        client headers the operator named in ``forward_headers`` (nothing else)."""
        out = {"content-type": "application/json", "accept-encoding": "identity"}
        for name in _RELAYED[wire]:
            value = client_headers.get(name)
            if value:
                out[name] = value
        key = self.config.api_key
        if wire == "openai":
            if key:
                out["authorization"] = f"Bearer {key}"
        else:
            out.setdefault("anthropic-version", ANTHROPIC_VERSION)
            if key:
                out["x-api-key"] = key
        for name in self.config.forward_headers:  # only what the operator named
            value = client_headers.get(name.lower())
            if value and name.lower() not in out:
                out[name.lower()] = value
        return out

    async def _send(self, wire: Wire, body: bytes, headers: dict[str, str]) -> httpx.Response:
        request = httpx.Request(
            "POST",
            self._urls[wire],
            headers=headers,
            content=body,
            extensions={"timeout": self._timeout},
        )
        try:
            response = await self.transport().handle_async_request(request)
        except Exception as exc:  # any transport failure is the upstream's, answered 5xx
            raise transport_error(exc) from exc
        response.request = request
        return response

    async def complete(
        self, wire: Wire, body: bytes, client_headers: Mapping[str, str]
    ) -> dict[str, Any]:
        """POST a non-streaming turn; the decoded JSON object, or :class:`UpstreamError`."""
        resp = await self._send(wire, body, self.headers(wire, client_headers))
        try:
            content = await resp.aread()
        except Exception as exc:
            raise transport_error(exc) from exc
        finally:
            await _close(resp)
        if resp.status_code >= 400:
            raise _status_error(resp.status_code, content)
        try:
            doc = loads(content, what="upstream response")
        except JsonTooDeep as exc:
            raise UpstreamError(502, f"the {exc}", "upstream_malformed") from None
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
        headers = {**self.headers(wire, client_headers), "accept": "text/event-stream"}
        resp = await self._send(wire, body, headers)
        try:
            if resp.status_code >= 400:
                try:
                    content = await resp.aread()
                except Exception as exc:
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
            await _close(resp)


async def _close(resp: httpx.Response) -> None:
    """Release the response's connection; a failure to close loses nothing we still need."""
    with contextlib.suppress(Exception):
        await resp.aclose()
