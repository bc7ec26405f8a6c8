"""The independent oracle the fuzz tests judge ALLOW by: were the arguments a JSON object?

Written from RFC 8259, not from the gateway's code: absent or JSON-white-space-only text
means no arguments (``{}``); text must parse as strict JSON (no NaN or Infinity) whose top
level is an object; a decoded value must be an object. Anything else is a malformed call
that no surface may ever ALLOW.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["allowed_kinds", "is_json_object_arguments"]

_JSON_WS = " \t\r\n"


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def is_json_object_arguments(arguments: Any) -> bool:
    if arguments is None:
        return True
    if isinstance(arguments, dict):
        return True
    if isinstance(arguments, str):
        if not arguments.strip(_JSON_WS):
            return True
        try:
            value = json.loads(arguments, parse_constant=_no_constants)
        except (ValueError, RecursionError):
            return False
        return isinstance(value, dict)
    return False


def allowed_kinds() -> frozenset[str]:
    """Wire verdict kinds that let a call through."""
    return frozenset({"ALLOW", "TRANSFORM"})
