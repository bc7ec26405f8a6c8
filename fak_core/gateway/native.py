"""The fak-native HTTP API: ``/v1/fak/*``, ``/healthz`` and ``/v1/models``.

Each handler decodes the body, builds the call through :class:`GatewayState` and returns
what the seam rendered. A deny is HTTP 200 with the verdict in the body; only a request
the gateway cannot turn into a call is a 4xx. Decisions are never made here.

Sessions belong to someone (:mod:`fak_core.gateway.sessions`): the first request on a
trace claims it and gets its token in ``X-Fak-Session``; every later request on the trace
(deciding, admitting, context, reading, resetting) needs that token or the operator key
(403 otherwise). Every reset and every policy reload is a
journal row saying who did it, committed before the answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fak_core.calls import ToolCall
from fak_core.gateway.errors import error_response
from fak_core.gateway.middleware import MINTED_KEY, header_value
from fak_core.gateway.sessions import OPERATOR_HEADER, SESSION_HEADER, SessionError
from fak_core.gateway.state import BLANK, GatewayState, WireError
from fak_core.gateway.wire import decode_body, parse_admit, parse_call, parse_trace_id
from fak_core.journal import JournalError
from fak_core.jsondepth import dumps
from fak_core.policy import Policy, PolicyError, load_policy, policy_digest
from fak_core.statedown import StateUnavailable

__all__ = ["NativeApi", "PolicySource", "json_response", "native_routes"]

PRINCIPAL_HEADER = "x-fak-principal"


class PolicySource:
    """Where the running policy came from, so ``/v1/fak/policy/reload`` can re-read it."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None

    def load(self) -> Policy:
        """Re-read and check the file; :class:`PolicyError` if it cannot be used."""
        if self.path is None:
            raise LookupError("this gateway was started without a policy file")
        return load_policy(self.path)

    def describe(self, policy: Policy) -> dict[str, Any]:
        return {"reloaded": True, "source": str(self.path), "digest": policy_digest(policy)}


def json_response(
    body: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON response written by :func:`fak_core.jsondepth.dumps` (orjson, with a
    fallback that never fails on depth)."""
    return Response(dumps(body), status_code=status, headers=headers, media_type="application/json")


def _traced(body: dict[str, Any], session: dict[str, str]) -> Response:
    headers = {"X-Trace-Id": header_value(str(body["trace_id"])), **session}
    return json_response(body, headers=headers)


def claim_session(state: GatewayState, request: Request, trace: str) -> dict[str, str]:
    """Claim ``trace`` for the request's session (:meth:`Sessions.claim`, with the
    request's ``X-Fak-Session`` token and ``X-Fak-Operator-Key``): the response headers
    that hand the client its token, if one was minted or bound; a :class:`SessionError`
    (403) when the trace is someone else's."""
    fresh = request.scope.get(MINTED_KEY) == trace
    token = state.sessions.claim(
        trace,
        request.headers.get(SESSION_HEADER),
        fresh=fresh,
        operator=request.headers.get(OPERATOR_HEADER),
    )
    return {"X-Fak-Session": token} if token is not None else {}


async def journal_row(state: GatewayState, fields: dict[str, str]) -> None:
    """Record a row (reset, policy reload) and wait until it is committed; without a
    journal this does nothing. :class:`JournalError` if it cannot be recorded. A field not
    given is stored as the empty text (:meth:`Journal.record_fields`)."""
    journal = state.journal
    if journal is None:
        return
    journal.record_fields(fields)
    await state.durable()


def _who(request: Request, role: str) -> str:
    client = request.client
    return f"{role}@{client.host}" if client is not None else role


Handler = Callable[[Request], Awaitable[Response]]


def _wire_errors(handler: Handler) -> Handler:
    """Turn a :class:`WireError` into a 400 envelope naming the field to fix."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except WireError as exc:
            return error_response(400, exc.message, param=exc.param)
        except SessionError as exc:
            return error_response(exc.status, exc.message, param="trace_id")
        except JournalError as exc:
            return error_response(503, str(exc), code="journal_unavailable")
        except StateUnavailable as exc:
            return error_response(503, str(exc), code="state_unavailable")

    wrapped.__name__ = handler.__name__
    wrapped.__doc__ = handler.__doc__
    return wrapped


async def _body(request: Request) -> dict[str, Any]:
    return decode_body(await request.body())


class NativeApi:
    """The endpoints of the fak-native routes over one :class:`GatewayState`: each method
    is a route's handler (:func:`native_routes` wraps the deciding ones in
    :func:`_wire_errors`)."""

    def __init__(
        self,
        state: GatewayState,
        source: PolicySource,
        models: Sequence[str],
        health: Mapping[str, Any] | None,
    ) -> None:
        self.state = state
        self.source = source
        self.models = models
        self.health = health

    def _call(self, request: Request, doc: dict[str, Any], *, admit: bool = False) -> Any:
        state = self.state
        parse = parse_admit if admit else parse_call
        req = parse(doc, request.headers.get(PRINCIPAL_HEADER))
        call: ToolCall = req.build(state, request.headers.get("x-trace-id"))
        return req, call, claim_session(state, request, call.trace_id)

    async def adjudicate(self, request: Request) -> Response:
        state = self.state
        _, call, session = self._call(request, await _body(request))
        # A decision that may wait runs on a decision worker; the event loop stays free.
        return _traced(await state.recorded(await state.adjudicate_async(call)), session)

    async def syscall(self, request: Request) -> Response:
        state = self.state
        _, call, session = self._call(request, await _body(request))
        # The tool may block (I/O); run it off the event loop.
        body = await state.recorded(await run_in_threadpool(state.syscall, call))
        return _traced(body, session)

    async def admit(self, request: Request) -> Response:
        state = self.state
        req, call, session = self._call(request, await _body(request), admit=True)
        body = await state.recorded(await run_in_threadpool(state.admit, call, req.result))
        return _traced(body, session)

    def _permitted(self, request: Request, trace: str) -> str:
        """Who the request is (``owner`` or ``operator``), else :class:`SessionError` 403."""
        who = self.state.sessions.permits(
            trace, request.headers.get(SESSION_HEADER), request.headers.get(OPERATOR_HEADER)
        )
        if who is None:
            raise SessionError(
                403,
                f"trace {trace!r}: reading or resetting a session needs its own token in "
                f"{SESSION_HEADER} (sent back by the request that first used the trace) "
                f"or the operator key in {OPERATOR_HEADER}",
            )
        return who

    async def trace_get(self, request: Request) -> Response:
        trace = str(request.path_params["trace_id"]).strip(BLANK)
        if not trace:
            return error_response(400, "missing trace id in the path", param="trace_id")
        self._permitted(request, trace)
        taint = self.state.kernel.taint(trace)
        body = {"trace_id": trace, "taint": taint.label, "dangerous": bool(taint)}
        return json_response(body, headers={"X-Trace-Id": header_value(trace)})

    async def trace_reset(self, request: Request) -> Response:
        state = self.state
        trace = parse_trace_id(await _body(request), required=True)
        assert trace is not None  # required=True refuses a blank one
        who = self._permitted(request, trace)
        # On record before it takes effect: a reset the journal cannot hold does not happen.
        await journal_row(
            state,
            {"event": "reset", "trace": trace, "verdict": "RESET", "by": _who(request, who)},
        )
        state.kernel.reset_trace(trace)
        return json_response(
            {"reset": True, "trace_id": trace}, headers={"X-Trace-Id": header_value(trace)}
        )

    async def trace_context(self, request: Request) -> Response:
        """Record the user's (or system's) own words for a session: destinations that
        appear in them are grounded (policy v2). Only the host, with text the model did
        not write; the session's token, the operator key or the first use of the trace is
        required."""
        state = self.state
        doc = await _body(request)
        trace = parse_trace_id(doc, required=True)
        assert trace is not None  # required=True refuses a blank one
        text = doc.get("text")
        if not isinstance(text, str):
            return error_response(400, "'text' must be a string: the user's words", param="text")
        origin = doc.get("origin", "user")
        if origin not in ("user", "system"):
            return error_response(400, "'origin' must be 'user' or 'system'", param="origin")
        session = claim_session(state, request, trace)
        await state.record_trusted(trace, [(origin, text)])
        return _traced({"recorded": True, "trace_id": trace, "origin": origin}, session)

    async def policy_reload(self, request: Request) -> Response:
        state, source = self.state, self.source
        row = {"event": "policy_reload", "by": _who(request, "client")}
        try:
            policy = await run_in_threadpool(source.load)
        except LookupError as exc:
            return error_response(404, f"{exc}; start it with --policy FILE to enable reload")
        except PolicyError as exc:
            await journal_row(state, {**row, "verdict": "REFUSED", "reason": str(exc)[:200]})
            return error_response(400, f"policy not reloaded, the old one stays active: {exc}")
        body = source.describe(policy)
        # On record before it takes effect, as a reset is.
        await journal_row(
            state,
            {**row, "verdict": "RELOADED", "args_digest": body["digest"], "reason": body["source"]},
        )
        state.kernel.set_policy(policy)
        return json_response(body)

    async def healthz(self, request: Request) -> Response:
        state = self.state
        body: dict[str, Any] = {
            "ok": True,
            "policy_digest": policy_digest(state.kernel.policy),
            "tools": len(state.kernel.tools()),
            "limits": state.limits(),
        }
        body.update(self.health or {})
        if state.shared is not None:  # several replicas: the shared state must answer
            shared = await state.shared.aprobe()
            body["state"] = shared
            body["ok"] = bool(shared.get("ok"))
        return json_response(body)

    async def list_models(self, request: Request) -> Response:
        data = [{"id": m, "object": "model", "owned_by": "fak"} for m in self.models]
        return json_response({"object": "list", "data": data})


def native_routes(
    state: GatewayState,
    *,
    policy_source: PolicySource | None = None,
    models: Sequence[str] = ("fak",),
    health: Mapping[str, Any] | None = None,
) -> list[Route]:
    """The fak-native routes over ``state``."""
    api = NativeApi(state, policy_source or PolicySource(None), models, health)
    return [
        Route("/v1/fak/adjudicate", _wire_errors(api.adjudicate), methods=["POST"]),
        Route("/v1/fak/syscall", _wire_errors(api.syscall), methods=["POST"]),
        Route("/v1/fak/admit", _wire_errors(api.admit), methods=["POST"]),
        Route("/v1/fak/trace/reset", _wire_errors(api.trace_reset), methods=["POST"]),
        Route("/v1/fak/trace/context", _wire_errors(api.trace_context), methods=["POST"]),
        Route("/v1/fak/trace/{trace_id:str}", _wire_errors(api.trace_get), methods=["GET"]),
        Route("/v1/fak/policy/reload", _wire_errors(api.policy_reload), methods=["POST"]),
        Route("/healthz", api.healthz, methods=["GET"]),
        Route("/v1/models", api.list_models, methods=["GET"]),
    ]
