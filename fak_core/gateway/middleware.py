"""Cross-cutting HTTP behaviour as pure ASGI middleware: trace ids, errors, auth, body cap.

They wrap every route (fak-native, proxies, MCP) so each rule holds everywhere:

- :class:`TraceMiddleware` (outermost): every request gets an ``X-Trace-Id`` (the client's
  or a minted one, written back on the request headers) and every response carries one; an
  exception that escapes a handler becomes a logged 500 envelope, never a bare traceback.
- :class:`AuthMiddleware`: with a key configured, every path but ``/healthz`` needs
  ``Authorization: Bearer <key>`` or ``X-Api-Key: <key>`` (SHA-256 digests compared in
  constant time), else 401.
- :class:`BodyLimitMiddleware`: a body over the cap is refused with 413, by its declared
  ``Content-Length`` or, for chunked or lying bodies, by counting what arrives.
- :class:`JournalScopeMiddleware`: each request (its streamed body included) runs in one
  decision-journal request scope, so no request can queue more than its share of rows.
- :class:`HostOriginMiddleware`: on every route (the native API, the proxies and ``/mcp``
  alike), a ``Host`` the gateway does not answer for is a 421 (DNS rebinding), an
  ``Origin`` that is not one of those hosts is a 403 (cross-site), and a POST with a body
  that is not ``application/json`` is a 415 (a cross-site ``text/plain`` POST needs no
  CORS preflight, so it must not be accepted).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import string
from collections.abc import Callable, Sequence
from urllib.parse import quote, urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fak_core.gateway.errors import error_response
from fak_core.gateway.sessions import CALLER, trace_id_problem
from fak_core.gateway.state import BLANK
from fak_core.journal import request_scope

__all__ = [
    "AuthMiddleware",
    "BodyLimitMiddleware",
    "HostOriginMiddleware",
    "JournalScopeMiddleware",
    "LOOPBACK_NAMES",
    "allowed_hosts_for",
    "content_length",
    "TraceMiddleware",
    "MINTED_KEY",
    "TRACE_HEADER",
    "header_value",
]

#: The ASGI scope key under which :class:`TraceMiddleware` leaves the trace id it minted.
MINTED_KEY = "fak.minted_trace"

TRACE_HEADER = "x-trace-id"
_TRACE_HEADER_B = TRACE_HEADER.encode("latin-1")
_log = logging.getLogger("fak_core.gateway")
# Visible ASCII and space, except the escape character itself.
_HEADER_SAFE = "".join(c for c in string.printable if c.isprintable() and c != "%")


def header_value(text: str) -> str:
    """``text`` as an HTTP header value: itself when it is visible ASCII (and space), else
    percent-encoded UTF-8, so that a trace id with any characters can be echoed in
    ``X-Trace-Id`` (the body carries it unchanged)."""
    if text.isascii() and text.isprintable():
        return text
    return quote(text, safe=_HEADER_SAFE, errors="surrogatepass")


def content_length(value: str | None) -> int | None:
    """The length a ``Content-Length`` value declares, else None (no value, or not a length).

    RFC 9110 (8.6) writes it ``1*DIGIT``, and ``DIGIT`` is ASCII ``0``-``9`` only: a sign, an
    underscore, a superscript or any other Unicode digit (which ``str.isdigit`` and ``int``
    accept, or accept and then fail on) is not a length. Blanks (space, tab) around the
    value are the field's own white space and are read past.
    """
    if value is None:
        return None
    text = value.strip(" \t")
    if not text or not text.isascii() or not text.isdigit():
        return None
    return int(text)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


class TraceMiddleware:
    """Ensure a trace id on every request and response; turn escaped exceptions into 500s."""

    def __init__(self, app: ASGIApp, mint: Callable[[], str]) -> None:
        self.app = app
        self.mint = mint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = _header(scope, _TRACE_HEADER_B)
        if given and given.strip(BLANK):
            trace = given.strip(BLANK)
            problem = trace_id_problem(given)
            if problem is not None:
                await error_response(400, f"X-Trace-Id: {problem}", param="trace_id")(
                    scope, receive, send
                )
                return
        else:
            trace = self.mint()
            scope = {**scope, MINTED_KEY: trace}
        if given != trace:
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != _TRACE_HEADER_B]
            headers.append((_TRACE_HEADER_B, trace.encode("latin-1", "replace")))
            scope = {**scope, "headers": headers}
        echoed = header_value(trace).encode("ascii")
        started = False
        client = scope.get("client")
        CALLER.set((str(client[0]) if client else "", ""))

        async def send_with_trace(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", ()))
                if not any(k.lower() == _TRACE_HEADER_B for k, _ in headers):
                    headers.append((_TRACE_HEADER_B, echoed))
                    message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_trace)
        except Exception:
            _log.exception("unhandled error serving %s %s", scope.get("method"), scope.get("path"))
            if started:  # the response is half sent: nothing clean left to say
                raise
            response = error_response(
                500,
                "internal error while handling the request; the gateway logged it "
                f"under trace {trace}",
                headers={"X-Trace-Id": header_value(trace)},
            )
            await response(scope, receive, send)


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8")).digest()


class AuthMiddleware:
    """Require the configured API key on every path except the exempt ones."""

    def __init__(
        self, app: ASGIApp, api_key: str, exempt: frozenset[str] = frozenset({"/healthz"})
    ) -> None:
        if not api_key:
            raise ValueError("AuthMiddleware needs a non-empty api_key")
        self.app = app
        self.key_digest = _digest(api_key)
        self.exempt = exempt

    def _credential(self, scope: Scope) -> str | None:
        auth = _header(scope, b"authorization")
        if auth:
            scheme, _, token = auth.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
        key = _header(scope, b"x-api-key")
        return key.strip() if key and key.strip() else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in self.exempt:
            await self.app(scope, receive, send)
            return
        cred = self._credential(scope)
        # Compare digests (equal length) in constant time; a missing key still does the work.
        ok = hmac.compare_digest(_digest(cred or ""), self.key_digest) and cred is not None
        if not ok:
            response = error_response(
                401,
                "missing or invalid credentials: send 'Authorization: Bearer <key>' "
                "or 'X-Api-Key: <key>'",
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        # The verified credential identifies the caller (a rate limit keyed by credential).
        CALLER.set((CALLER.get()[0], self.key_digest.hex()[:16]))
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """Refuse request bodies over ``limit`` bytes with 413 before any handler sees them.

    The body is read here (bounded by the limit) and replayed to the app, so a chunked body
    that crosses the limit is refused whole and the handler never sees a truncated one.
    """

    def __init__(self, app: ASGIApp, limit: Callable[[], int]) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit()
        declared = _header(scope, b"content-length")
        if declared is not None:
            length = content_length(declared)
            if length is None:
                await error_response(
                    400, "Content-Length must be a whole number (ASCII digits 0-9)"
                )(scope, receive, send)
                return
            if length > limit:
                await self._too_large(scope, receive, send, limit)
                return
        if scope.get("method") in ("GET", "HEAD", "OPTIONS") and declared is None:
            await self.app(scope, receive, send)  # no body announced: nothing to buffer
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client went away mid-body: nobody to answer
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                await self._too_large(scope, receive, send, limit)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _too_large(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = error_response(
            413,
            f"request body exceeds the gateway's limit of {limit} bytes; send a smaller body",
            code="request_too_large",
        )
        await response(scope, receive, send)


class JournalScopeMiddleware:
    """Run each HTTP request, its streamed response included, in one journal request scope
    (:func:`fak_core.journal.request_scope`): the rows it records are bounded in bytes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with request_scope():
            await self.app(scope, receive, send)


_CHECKED = frozenset({b"host", b"origin", b"content-type", b"content-length", b"transfer-encoding"})
#: The names a gateway bound to loopback answers for (by default).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts_for(bind: str | None, given: Sequence[str] = ()) -> tuple[str, ...] | None:
    """The host names to answer for: ``given`` (``fak serve --allowed-hosts``) if any, else
    the loopback names when bound to loopback, else None (no Host or Origin check)."""
    if given:  # an entry that names no host (":8080") would admit an empty Host
        return tuple(name for name in map(_host_name, given) if name)
    if bind is not None and _is_loopback(bind):
        return LOOPBACK_NAMES
    return None


def _host_name(host: str) -> str:
    """The name part of a ``Host`` header value or host name (lower case, no port, IPv6
    without brackets)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isascii() and port.isdigit() and ":" not in name else host


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").partition(";")[0].strip().lower()
    return media == "application/json"


class HostOriginMiddleware:
    """Refuse requests for hosts the gateway does not serve, cross-site origins, and POST
    bodies that are not JSON. With ``allowed`` None the Host and Origin checks are off
    (a gateway bound to a public address with no ``--allowed-hosts``)."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str] | None) -> None:
        self.app = app
        self.allowed = frozenset(allowed) if allowed is not None else None

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        """(status, message, code) for a request this middleware refuses, else None."""
        seen: dict[bytes, str] = {}
        for key, value in scope.get("headers", ()):  # one pass over the headers
            key = key.lower()
            if key in _CHECKED and key not in seen:
                seen[key] = value.decode("latin-1")
        allowed = self.allowed
        if allowed is not None:
            host = seen.get(b"host")
            if host is None or _host_name(host) not in allowed:
                return (
                    421,
                    f"Host {host!r} is not a name this gateway answers for "
                    f"({', '.join(sorted(allowed))}); add it with fak serve --allowed-hosts",
                    "invalid_host",
                )
            origin = seen.get(b"origin")
            if origin is not None:
                parts = urlsplit(origin.strip())
                if parts.scheme not in ("http", "https") or (parts.hostname or "") not in allowed:
                    return (
                        403,
                        f"Origin {origin!r} is not allowed: cross-site requests are refused; "
                        "add the host with fak serve --allowed-hosts",
                        "invalid_origin",
                    )
        if scope.get("method") == "POST" and not _is_json(seen.get(b"content-type")):
            length = seen.get(b"content-length")
            chunked = b"transfer-encoding" in seen
            # A Content-Length that is not a number is BodyLimitMiddleware's 400.
            declared = content_length(length)
            if chunked or (declared is not None and declared > 0):
                return (
                    415,
                    "a POST body must be sent as Content-Type: application/json, not "
                    f"{seen.get(b'content-type')!r}",
                    "unsupported_media_type",
                )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self.refusal(scope)
            if refused is not None:
                status, message, code = refused
                await error_response(status, message, code=code)(scope, receive, send)
                return
        await self.app(scope, receive, send)
