"""Mutants of D14 and D10.7 (``theorems/gateway.md``): a gateway door that lets too much
in, and stdio frames that go unanswered.

Each one edits the middleware's source (:func:`tests.mutants.sourcepatch.edited`) or
patches the gateway's state for the duration of a witness re-run.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

from fak_core.gateway.app import McpHttpEndpoint
from fak_core.gateway.mcp_server import _CheckedStdin, _frame_error
from fak_core.gateway.middleware import AuthMiddleware, BodyLimitMiddleware
from fak_core.gateway.state import GatewayState
from pytest_fak import mutant
from tests.mutants.sourcepatch import edited

__all__: list[str] = []


@mutant("D14/cap-on-declared-length-only")
def cap_on_declared_length_only() -> Any:
    """The cap reads only the declared Content-Length: a chunked body, or one longer than
    it declares, reaches the route whatever its size."""
    return edited(BodyLimitMiddleware.__call__, ("if size > limit:", "if False:"))


@mutant("D14/one-byte-over-passes")
def one_byte_over_passes() -> Any:
    """Off by one at the cap: a body of the cap plus one byte is served."""
    return edited(
        BodyLimitMiddleware.__call__,
        ("if length > limit:", "if length > limit + 1:"),
        ("if size > limit:", "if size > limit + 1:"),
    )


@mutant("D14/key-on-native-routes-only")
def key_on_native_routes_only() -> Any:
    """The key is required on the native API only: the proxies and ``/mcp`` answer anyone."""
    return edited(
        AuthMiddleware.__call__,
        (
            'if scope["type"] != "http" or scope.get("path") in self.exempt:',
            'if scope["type"] != "http" or scope.get("path") in self.exempt '
            'or not str(scope.get("path", "")).startswith("/v1/fak/"):',
        ),
    )


@mutant("D14/any-scheme-carries-the-key")
def any_scheme_carries_the_key() -> Any:
    """The ``Authorization`` scheme is not read: ``Basic <key>`` or ``Token <key>`` passes,
    and a wrong token under any scheme hides the right ``X-Api-Key``."""
    return edited(
        AuthMiddleware._credential,
        ('if scheme.lower() == "bearer" and token.strip():', "if token.strip():"),
    )


@mutant("D14/tool-results-uncapped")
def tool_results_uncapped() -> Any:
    """A turn's inbound tool results are never counted against ``--max-tool-results``."""
    return mock.patch.object(GatewayState, "refuse_tool_results", return_value=None)


@mutant("D10.7/blank-oversized-frame-dropped")
def blank_oversized_frame_dropped() -> Any:
    """A stdio frame over the limit whose first bytes are blanks is dropped unanswered (it
    is read as a blank line), as it once was: the client waits for an answer forever."""
    return edited(
        _CheckedStdin._lines,
        ("elif not line.strip():", "if not line.strip():"),
    )


@mutant("D10.7/reader-disagreement-dropped")
def reader_disagreement_dropped() -> Any:
    """A stdio frame orjson reads but the SDK's reader refuses (a number of over 4300
    mantissa digits) is let through, as four waivers once claimed no frame could be: the
    SDK drops it without a word and the client waits forever."""
    return edited(_frame_error, ("return _rpc_error(rid, INVALID_REQUEST, why)", "return None"))


@mutant("D10.7/mcp-http-error-without-id")
def mcp_http_error_without_id() -> Any:
    """``/mcp``'s depth refusal written without its None fields, as it once was: a message
    whose id is unknown is answered without the ``id`` JSON-RPC 2.0 requires (null)."""
    return edited(
        McpHttpEndpoint._checked_body,
        ("by_alias=True, exclude_unset=True", "by_alias=True, exclude_none=True"),
    )
