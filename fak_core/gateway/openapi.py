"""The OpenAPI 3.1 document of the gateway's HTTP API, written by hand from the wire shapes.

It describes every fak-native route with its request and response bodies and every error
status a route can answer, so a fuzzer (schemathesis) can drive it and check conformance.
Other surfaces (the proxies) can merge their own ``paths`` and ``schemas`` in.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import fak_core

__all__ = ["build_openapi"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERR = _ref("Error")
# The gateway refuses a blank (empty or white-space only) tool name or trace id with a 400.
_NON_BLANK: dict[str, Any] = {
    "type": "string",
    "pattern": r"\S",
    "description": "must not be blank (white space only is refused)",
}
_OPT_STR = ["string", "null"]
_OPT_BOOL = ["boolean", "null"]
#: The fields of a call, shared by every request that names one.
_CALL_FIELDS: dict[str, Any] = {
    "tool": _NON_BLANK,
    "arguments": _ref("Arguments"),
    "trace_id": {
        "type": _OPT_STR,
        "maxLength": 128,
        "description": "beats the X-Trace-Id header; at most 128 characters (400 past "
        "that). The first request on a trace claims it for its session; every later one "
        "must send its X-Fak-Session token (or the operator key), else a 403",
    },
    "witness": {"type": _OPT_STR},
    "principal": {"type": _OPT_STR, "description": "X-Fak-Principal beats it"},
    "read_only": {"type": _OPT_BOOL, "description": "advisory; grants nothing"},
}

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["message", "type", "code", "param"],
                "properties": {
                    "message": {"type": "string"},
                    "type": {
                        "type": "string",
                        "enum": [
                            "invalid_request_error",
                            "authentication_error",
                            "rate_limit_error",
                            "overloaded_error",
                            "server_error",
                        ],
                    },
                    "code": {"type": ["string", "null"]},
                    "param": {"type": ["string", "null"]},
                },
            }
        },
    },
    "WireVerdict": {
        "type": "object",
        "required": ["kind"],
        "properties": {
            "kind": {
                "type": "string",
                "description": "ALLOW, DENY, TRANSFORM, QUARANTINE, REQUIRE_WITNESS, DEFER, "
                "INDETERMINATE, a registered extension name, or KIND_<n>",
            },
            "reason": {"type": "string"},
            "by": {"type": "string"},
            "disposition": {
                "type": "string",
                "enum": ["TERMINAL", "RETRYABLE", "WAIT", "ESCALATE"],
            },
            "detail": {
                "type": "object",
                "required": ["claim"],
                "properties": {"claim": {"type": "string"}},
            },
        },
    },
    "Arguments": {
        "description": "the call's arguments: a JSON object, or its JSON text (OpenAI style); "
        "absent means {}. Anything else reaches the kernel as JSON text and is refused "
        "there as MALFORMED (a verdict, not a 400).",
    },
    "CallRequest": {
        "type": "object",
        "required": ["tool"],
        "description": "optional fields may be null, which means absent",
        "properties": _CALL_FIELDS,
    },
    "AdmitRequest": {
        "type": "object",
        "required": ["tool"],
        "description": "optional fields may be null, which means absent",
        "properties": {
            **_CALL_FIELDS,
            "result": {"description": "the result: a JSON object, or text"},
        },
    },
    "ResultEnvelope": {
        "type": "object",
        "required": ["status", "content", "meta"],
        "properties": {
            "status": {"type": "string", "enum": ["OK", "ERROR", "PENDING"]},
            "content": {"type": "string"},
            "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    "AdjudicateResponse": {
        "type": "object",
        "required": ["verdict", "trace_id"],
        "properties": {
            "verdict": _ref("WireVerdict"),
            "repaired_arguments": {"type": "string", "description": "only on TRANSFORM"},
            "trace_id": {"type": "string"},
        },
    },
    "SyscallResponse": {
        "type": "object",
        "required": ["verdict", "result", "trace_id"],
        "properties": {
            "verdict": _ref("WireVerdict"),
            "result": _ref("ResultEnvelope"),
            "trace_id": {"type": "string"},
        },
    },
    "TraceState": {
        "type": "object",
        "required": ["trace_id", "taint", "dangerous"],
        "properties": {
            "trace_id": {"type": "string"},
            "taint": {"type": "string", "enum": ["trusted", "tainted", "quarantined"]},
            "dangerous": {"type": "boolean"},
        },
    },
    "TraceResetRequest": {
        "type": "object",
        "required": ["trace_id"],
        "properties": {"trace_id": {"type": "string", "pattern": r"\S", "maxLength": 128}},
    },
    "TraceResetResponse": {
        "type": "object",
        "required": ["reset", "trace_id"],
        "properties": {"reset": {"const": True}, "trace_id": {"type": "string"}},
    },
    "TraceContextRequest": {
        "type": "object",
        "required": ["trace_id", "text"],
        "properties": {
            "trace_id": {"type": "string", "pattern": r"\S", "maxLength": 128},
            "text": {"type": "string", "description": "the user's (or system's) own words"},
            "origin": {"enum": ["user", "system"], "default": "user"},
        },
    },
    "TraceContextResponse": {
        "type": "object",
        "required": ["recorded", "trace_id", "origin"],
        "properties": {
            "recorded": {"const": True},
            "trace_id": {"type": "string"},
            "origin": {"enum": ["user", "system"]},
        },
    },
    "PolicyReloadResponse": {
        "type": "object",
        "required": ["reloaded", "source", "digest"],
        "properties": {
            "reloaded": {"const": True},
            "source": {"type": "string"},
            "digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
        },
    },
    "Health": {
        "type": "object",
        "required": ["ok"],
        "properties": {
            "ok": {
                "type": "boolean",
                "description": "true; false only when the shared session state "
                "(fak serve --state) cannot be reached or trusted, or is at 90% of its "
                "maxmemory (see state)",
            },
            "state": {
                "type": "object",
                "description": "with fak serve --state: the shared state's probe (backend, "
                "ok, failures, error; keys, used_memory, maxmemory, ttl_s and orphan_bits "
                "when Redis answered)",
            },
            "policy_digest": {"type": "string"},
            "tools": {"type": "integer"},
            "limits": {
                "type": "object",
                "description": "every store's bound and counters: max_body, "
                "max_tool_results, tool_results_refused, max_trace_id_bytes, ledger_bytes, "
                "ledger_bytes_limit, ledger_evicted, ledger_tombstones, held_bytes, "
                "held_bytes_limit, held_evicted, grounding_sessions, grounding_bytes, "
                "grounding_bytes_limit, grounding_evicted, sessions, session_bytes, "
                "session_bytes_limit, sessions_evicted, session_refusals, ...",
                "additionalProperties": {"type": "integer"},
            },
        },
    },
    "ModelList": {
        "type": "object",
        "required": ["object", "data"],
        "properties": {
            "object": {"const": "list"},
            "data": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "object", "owned_by"],
                    "properties": {
                        "id": {"type": "string"},
                        "object": {"const": "model"},
                        "owned_by": {"type": "string"},
                    },
                },
            },
        },
    },
}

_TRACE_HEADER = {
    "X-Trace-Id": {
        "description": "the request's trace id (echoed, or minted: 128 random bits)",
        "schema": {"type": "string"},
    },
    "X-Fak-Session": {
        "description": "sent when this request claimed the trace (its first use): the "
        "session token that alone (besides the operator key) may act in the trace from now "
        "on (decide, admit, record context, read, reset). The gateway stores only its "
        "SHA-256 digest",
        "schema": {"type": "string"},
    },
}
#: The request headers of every route that names a trace: the session token that owns it,
#: or the operator key.
_OWNER_PARAMS = [
    {
        "name": "X-Fak-Session",
        "in": "header",
        "required": False,
        "description": "the session token of the trace (16 to 256 characters; a secret of "
        "the client's own, or the one the trace's first answer carried): binds an unowned "
        "trace to it. On an owned trace every request must send it (or the operator key): "
        "without it, or with another token, the request is a 403 and changes nothing",
        "schema": {"type": "string", "minLength": 16, "maxLength": 256},
    },
    {
        "name": "X-Fak-Operator-Key",
        "in": "header",
        "required": False,
        "description": "the operator key (fak serve --operator-key-env): acts in any trace, "
        "one whose owner the gateway forgot included",
        "schema": {"type": "string"},
    },
]


def _errors(*statuses: int) -> dict[str, Any]:
    text = {
        400: "the request cannot become a call; the message says what to fix",
        401: "missing or invalid API key (only when the gateway requires one)",
        403: "the trace belongs to another session (none, or another, X-Fak-Session token "
        "sent), or to one the gateway no longer remembers: send the trace's own token or "
        "the operator key, or omit the trace id (one is minted) or use an id of your own",
        404: "not found",
        405: "wrong method",
        413: "request body (or its tool results) over the gateway's limit",
        415: "a POST body that is not Content-Type: application/json",
        421: "a Host header the gateway does not answer for (DNS rebinding; see "
        "fak serve --allowed-hosts)",
        500: "unexpected failure; logged under the trace id",
        503: "the decision journal cannot record the change, or the shared session state "
        "(fak serve --state) cannot be reached (nothing changed), or it is at 90% of its "
        "maxmemory and the request would open a new session (open sessions go on)",
    }
    out = {}
    # 403 on every route: a cross-site Origin (and, on trace routes, a non-owner).
    for status in (*statuses, 401, 403, 405, 413, 415, 421, 500):
        out[str(status)] = _json(_ERR, text[status])
    return out


def _post(
    summary: str,
    request: str,
    response: str,
    *errors: int,
    required: bool = True,
    parameters: list[dict[str, Any]] = _OWNER_PARAMS,
) -> dict[str, Any]:
    ok = _json(_ref(response), "the decision (a deny is a 200 too)")
    ok["headers"] = _TRACE_HEADER
    return {
        "post": {
            "summary": summary,
            "parameters": copy.deepcopy(parameters),
            "requestBody": {
                "required": required,
                "content": {"application/json": {"schema": _ref(request)}},
            },
            "responses": {"200": ok, **_errors(*errors)},
        }
    }


def _paths() -> dict[str, Any]:
    trace_param = {
        "name": "trace_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": r"\S", "maxLength": 128},
    }
    return {
        "/v1/fak/adjudicate": _post(
            "Decide a tool call (nothing runs)", "CallRequest", "AdjudicateResponse", 400, 503
        ),
        "/v1/fak/syscall": _post(
            "Decide a tool call and run it if allowed", "CallRequest", "SyscallResponse", 400, 503
        ),
        "/v1/fak/admit": _post(
            "Admit a result the client produced", "AdmitRequest", "SyscallResponse", 400, 503
        ),
        "/v1/fak/trace/reset": _post(
            "Reset a session's taint mark (its owner or the operator; journaled)",
            "TraceResetRequest",
            "TraceResetResponse",
            400,
            503,
            parameters=_OWNER_PARAMS,
        ),
        "/v1/fak/trace/context": _post(
            "Record the user's words for a session: destinations in them are grounded",
            "TraceContextRequest",
            "TraceContextResponse",
            400,
            503,
        ),
        "/v1/fak/trace/{trace_id}": {
            "get": {
                "summary": "A session's taint mark (its owner or the operator)",
                "parameters": [trace_param, *_OWNER_PARAMS],
                "responses": {
                    "200": _json(_ref("TraceState"), "the session's taint"),
                    **_errors(400, 503),
                },
            }
        },
        "/v1/fak/policy/reload": {
            "post": {
                "summary": "Re-read the policy file the gateway was started with",
                "responses": {
                    "200": _json(_ref("PolicyReloadResponse"), "the new policy is active"),
                    **_errors(400, 404, 503),
                },
            }
        },
        "/healthz": {
            "get": {
                "summary": "Liveness (never needs the API key)",
                "responses": {"200": _json(_ref("Health"), "alive"), **_errors()},
            }
        },
        "/v1/models": {
            "get": {
                "summary": "Models this gateway answers for",
                "responses": {"200": _json(_ref("ModelList"), "the models"), **_errors()},
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "responses": {"200": _json({"type": "object"}, "OpenAPI 3.1"), **_errors()},
            }
        },
    }


def build_openapi(
    *,
    extra_paths: Mapping[str, Any] | None = None,
    extra_schemas: Mapping[str, Any] | None = None,
    mcp: bool = True,
) -> dict[str, Any]:
    """The document; ``extra_paths``/``extra_schemas`` are merged in (they may not clash)."""
    paths = _paths()
    schemas = copy.deepcopy(_SCHEMAS)
    for name, item in (extra_paths or {}).items():
        if name in paths:
            raise ValueError(f"OpenAPI path {name!r} is already described")
        paths[name] = copy.deepcopy(item)
    for name, schema in (extra_schemas or {}).items():
        if name in schemas:
            raise ValueError(f"OpenAPI schema {name!r} is already described")
        schemas[name] = copy.deepcopy(schema)
    description = (
        "The fak gateway: every tool call is adjudicated by the in-process kernel. "
        "A deny is a value (HTTP 200 with the verdict), never a 5xx."
    )
    if mcp:
        description += (
            " MCP (streamable HTTP) is served at /mcp with tools fak_adjudicate, "
            "fak_syscall and fak_admit; it speaks JSON-RPC and is not described here."
        )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fak gateway",
            "version": fak_core.__version__,
            "description": description,
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
            },
        },
        "security": [{}, {"bearer": []}, {"apiKey": []}],
    }
