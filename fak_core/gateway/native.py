"""The fak-native HTTP API: ``/v1/fak/*``, ``/healthz`` and ``/v1/models``.

Each handler decodes the body, builds the call through :class:`GatewayState` and returns
what the seam rendered. A deny is HTTP 200 with the verdict in the body; only a request
the gateway cannot turn into a call is a 4xx. Decisions are never made here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fak_core.gateway.errors import error_response
from fak_core.gateway.middleware import header_value
from fak_core.gateway.state import GatewayState, WireError
from fak_core.gateway.wire import decode_body, parse_admit, parse_call, parse_trace_id
from fak_core.jsondepth import dumps
from fak_core.policy import PolicyError, load_policy, policy_digest

__all__ = ["PolicySource", "json_response", "native_routes"]

PRINCIPAL_HEADER = "x-fak-principal"


class PolicySource:
    """Where the running policy came from, so ``/v1/fak/policy/reload`` can re-read it."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None

    def reload(self, state: GatewayState) -> dict[str, Any]:
        """Re-read the file and swap it in; :class:`PolicyError` leaves the old one running."""
        if self.path is None:
            raise LookupError("this gateway was started without a policy file")
        policy = load_policy(self.path)
        state.kernel.set_policy(policy)
        return {"reloaded": True, "source": str(self.path), "digest": policy_digest(policy)}


def json_response(
    body: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON response written by :func:`fak_core.jsondepth.dumps` (orjson, with a
    fallback that never fails on depth)."""
    return Response(dumps(body), status_code=status, headers=headers, media_type="application/json")


def _traced(body: dict[str, Any]) -> Response:
    return json_response(body, headers={"X-Trace-Id": header_value(str(body["trace_id"]))})


Handler = Callable[[Request], Awaitable[Response]]


def _wire_errors(handler: Handler) -> Handler:
    """Turn a :class:`WireError` into a 400 envelope naming the field to fix."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except WireError as exc:
            return error_response(400, exc.message, param=exc.param)

    wrapped.__name__ = handler.__name__
    wrapped.__doc__ = handler.__doc__
    return wrapped


def native_routes(
    state: GatewayState,
    *,
    policy_source: PolicySource | None = None,
    models: Sequence[str] = ("fak",),
    health: Mapping[str, Any] | None = None,
) -> list[Route]:
    """The fak-native routes over ``state``."""
    source = policy_source or PolicySource(None)

    async def _body(request: Request) -> dict[str, Any]:
        return decode_body(await request.body())

    @_wire_errors
    async def adjudicate(request: Request) -> Response:
        req = parse_call(await _body(request), request.headers.get(PRINCIPAL_HEADER))
        call = req.build(state, request.headers.get("x-trace-id"))
        # A decision that may wait runs on a decision worker; the event loop stays free.
        return _traced(await state.recorded(await state.adjudicate_async(call)))

    @_wire_errors
    async def syscall(request: Request) -> Response:
        req = parse_call(await _body(request), request.headers.get(PRINCIPAL_HEADER))
        call = req.build(state, request.headers.get("x-trace-id"))
        # The tool may block (I/O); run it off the event loop.
        return _traced(await state.recorded(await run_in_threadpool(state.syscall, call)))

    @_wire_errors
    async def admit(request: Request) -> Response:
        req = parse_admit(await _body(request), request.headers.get(PRINCIPAL_HEADER))
        call = req.build(state, request.headers.get("x-trace-id"))
        return _traced(await state.recorded(await run_in_threadpool(state.admit, call, req.result)))

    async def trace_get(request: Request) -> Response:
        trace = str(request.path_params["trace_id"]).strip()
        if not trace:
            return error_response(400, "missing trace id in the path", param="trace_id")
        taint = state.kernel.taint(trace)
        body = {"trace_id": trace, "taint": taint.label, "dangerous": bool(taint)}
        return json_response(body, headers={"X-Trace-Id": header_value(trace)})

    @_wire_errors
    async def trace_reset(request: Request) -> Response:
        trace = parse_trace_id(await _body(request), required=True)
        assert trace is not None  # required=True refuses a blank one
        state.kernel.reset_trace(trace)
        return json_response(
            {"reset": True, "trace_id": trace}, headers={"X-Trace-Id": header_value(trace)}
        )

    async def policy_reload(request: Request) -> Response:
        try:
            body = await run_in_threadpool(source.reload, state)
        except LookupError as exc:
            return error_response(404, f"{exc}; start it with --policy FILE to enable reload")
        except PolicyError as exc:
            return error_response(400, f"policy not reloaded, the old one stays active: {exc}")
        return json_response(body)

    async def healthz(request: Request) -> Response:
        body: dict[str, Any] = {
            "ok": True,
            "policy_digest": policy_digest(state.kernel.policy),
            "tools": len(state.kernel.tools()),
        }
        body.update(health or {})
        return json_response(body)

    async def list_models(request: Request) -> Response:
        data = [{"id": m, "object": "model", "owned_by": "fak"} for m in models]
        return json_response({"object": "list", "data": data})

    return [
        Route("/v1/fak/adjudicate", adjudicate, methods=["POST"]),
        Route("/v1/fak/syscall", syscall, methods=["POST"]),
        Route("/v1/fak/admit", admit, methods=["POST"]),
        Route("/v1/fak/trace/reset", trace_reset, methods=["POST"]),
        Route("/v1/fak/trace/{trace_id:str}", trace_get, methods=["GET"]),
        Route("/v1/fak/policy/reload", policy_reload, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
    ]
