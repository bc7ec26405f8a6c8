"""The gateway's error envelope: one OpenAI-style JSON shape for every refused request.

``{"error": {"message", "type", "code", "param"}}``. Every surface (fak-native routes, the
proxies, middleware) answers errors through :func:`error_response` so clients see one shape.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

__all__ = ["error_body", "error_response", "error_type_for"]


def error_type_for(status: int) -> str:
    """The envelope ``type`` for an HTTP status."""
    if status in (401, 403):
        return "authentication_error"
    if status == 429:
        return "rate_limit_error"
    if status == 529:
        return "overloaded_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def error_body(
    status: int,
    message: str,
    *,
    type: str | None = None,
    code: str | None = None,
    param: str | None = None,
) -> dict[str, Any]:
    """The envelope as a plain dict (for surfaces that write their own response)."""
    return {
        "error": {
            "message": message,
            "type": type or error_type_for(status),
            "code": code,
            "param": param,
        }
    }


def error_response(
    status: int,
    message: str,
    *,
    type: str | None = None,
    code: str | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """A JSON error response with the envelope and ``status``."""
    return JSONResponse(
        error_body(status, message, type=type, code=code, param=param),
        status_code=status,
        headers=headers,
    )
