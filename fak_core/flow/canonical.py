"""RFC 8785 (JCS) canonical JSON and the SHA-256 digest over it.

The ``rfc8785`` package is the canonicaliser: object members sorted by their UTF-16
code units, ECMAScript number spelling, minimal string escapes, no whitespace. A value
JSON cannot carry faithfully (NaN, an integer beyond 2**53-1, a non-string key) is
refused with :class:`CanonicalError` rather than digested approximately. JSON *text*
is read as RFC 8785 reads it: every number is a double, so ``9007199254740992`` and
``9007199254740992.0`` are one value and get one digest.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import rfc8785

__all__ = ["CanonicalError", "canonical_bytes", "digest", "digest_json_text"]

_SAFE_INT = 2**53 - 1


class CanonicalError(ValueError):
    """A document that has no RFC 8785 canonical form."""


def canonical_bytes(doc: Any) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON-shaped Python value."""
    try:
        return rfc8785.dumps(doc)
    except rfc8785.CanonicalizationError as exc:
        raise CanonicalError(f"no canonical JSON form: {exc}") from None
    except (TypeError, RecursionError) as exc:  # an object JSON has no spelling for
        raise CanonicalError(f"not a JSON value: {exc}") from None


def digest(doc: Any) -> str:
    """``sha256:<hex>`` over the canonical bytes of ``doc``."""
    return "sha256:" + hashlib.sha256(canonical_bytes(doc)).hexdigest()


def digest_json_text(text: str | bytes) -> str:
    """The digest of a JSON text: independent of key order, whitespace and number spelling."""
    try:
        doc = json.loads(text, parse_constant=_reject_constant, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise CanonicalError(f"not JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    return digest(doc)


def _json_int(text: str) -> int | float:
    """JSON numbers are IEEE doubles (RFC 8785 3.2.2.3): a spelling beyond 2**53 is one."""
    value = int(text)
    return value if abs(value) <= _SAFE_INT else float(text)


def _reject_constant(name: str) -> Any:
    raise CanonicalError(f"{name} is not a JSON number")
