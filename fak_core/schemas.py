"""Per-tool JSON Schemas: checked when registered, compiled once, validated on the hot path.

A schema is checked against its metaschema with ``jsonschema`` (Draft 2020-12 unless the
schema names another draft), so an invalid schema is an error at registration, never at
call time. It is then compiled with ``jsonschema-rs``, the fast validator rung 1 uses.
Formats are annotations (the 2020-12 default) in both; remote ``$ref`` is never fetched.

One exception: jsonschema-rs decides ``multipleOf`` in floating point, so it takes
141668294859277408 (as a JSON number with an exponent) for a multiple of 5. A schema that
uses ``multipleOf`` anywhere is validated by ``jsonschema`` itself, which divides exactly;
such tools pay Python validation speed on rung 1 (the differential test found this).
Likewise ``uniqueItems``: jsonschema-rs took -2**63 and -9.223372036854776e18 (the same
number) for different items; the exact path decides it by canonical keys in linear time
(:mod:`fak_core.schemaequal`, theorem A7.7).

Every regular expression a schema applies to the arguments runs on one linear-time engine
on both paths (:mod:`fak_core.schemaregex`); a pattern that engine cannot take is refused
here, with the JSON pointer of the pattern, never handed to a backtracking engine.

A schema holding a number that is not finite (TOML's ``nan`` and ``inf``, the ``NaN``,
``Infinity`` and ``1e400`` Python's JSON reader takes) is refused naming where: JSON has
no such numbers, jsonschema-rs reads them as ``null`` (``{"const": nan}`` would then let a
``null`` through, which ``jsonschema`` refuses), and a ``maximum`` of NaN bounds nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jsonschema
import jsonschema_rs
from jsonschema.exceptions import SchemaError

from fak_core.schemaregex import LINEAR, exact_validator_class, locate, regex_refusal

__all__ = [
    "INEXACT_KEYWORDS",
    "CompiledSchema",
    "InvalidSchemaError",
    "SchemaRegistry",
    "compile_schema",
]


class InvalidSchemaError(ValueError):
    """A tool schema that is not a valid JSON Schema; the message says where and why."""


#: Keywords jsonschema-rs gets wrong at the edges; a schema using one is validated exactly.
INEXACT_KEYWORDS = frozenset({"multipleOf", "uniqueItems"})


def _uses(doc: Any, keywords: frozenset[str]) -> bool:
    if isinstance(doc, dict):
        return any(k in keywords or _uses(v, keywords) for k, v in doc.items())
    if isinstance(doc, list):
        return any(_uses(v, keywords) for v in doc)
    return False


def _non_finite(doc: Any) -> str | None:
    """Where the first NaN or infinity in ``doc`` is (document order), or None; iterative,
    one visit per value. ``doc`` is a table or a boolean, so a place is never the root."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(doc, ())]
    while stack:
        value, parts = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return "/".join(parts)
        if isinstance(value, Mapping):
            items = [(v, (*parts, str(k))) for k, v in value.items()]
        elif isinstance(value, list):
            items = [(v, (*parts, str(i))) for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(items))
    return None


def _path(parts: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


class CompiledSchema:
    """One tool's schema: the source document and the validator rung 1 runs (the compiled
    fast one, or ``jsonschema``'s when the schema uses an :data:`INEXACT_KEYWORDS` one)."""

    __slots__ = ("_exact", "_fast", "is_valid", "schema")

    def __init__(self, schema: Mapping[str, Any] | bool, fast: Any, exact: Any = None) -> None:
        self.schema = schema
        self._fast = fast
        self._exact = exact
        self.is_valid = exact.is_valid if exact is not None else fast.is_valid

    def first_error(self, instance: Any) -> str:
        """A short, fixable description of the first violation: JSON path and keyword."""
        if self._exact is not None:
            for error in self._exact.iter_errors(instance):
                return f"{_path(error.absolute_path)}: {error.validator}: {error.message}"
            return "$: schema: instance is not valid"
        for err in self._fast.iter_errors(instance):
            keyword = err.schema_path[-1] if err.schema_path else "schema"
            return f"{_path(err.instance_path)}: {keyword}: {err.message}"
        return "$: schema: instance is not valid"


def compile_schema(schema: Mapping[str, Any] | bool, tool: str = "") -> CompiledSchema:
    """Check ``schema`` against its metaschema and compile it; raise a clear error if invalid."""
    label = f"schema for tool {tool!r}" if tool else "schema"
    if not isinstance(schema, (Mapping, bool)):
        raise InvalidSchemaError(
            f"{label} must be a JSON object or a boolean, not {type(schema).__name__}"
        )
    doc: Any = dict(schema) if isinstance(schema, Mapping) else schema
    if (where := _non_finite(doc)) is not None:
        raise InvalidSchemaError(
            f"{label} holds a number that is not finite at {where}: JSON has no NaN or "
            "infinity; write a finite number there"
        )
    cls = jsonschema.validators.validator_for(doc, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(doc)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise InvalidSchemaError(f"{label} is invalid at {where}: {exc.message}") from None
    fast = _fast_validator(doc, label)
    exact = None
    if _uses(doc, INEXACT_KEYWORDS):
        if _uses(doc, _UNEVALUATED) and _uses(doc, _PATTERN_KEYS):
            raise InvalidSchemaError(
                f"{label} uses multipleOf, so it is validated exactly by the jsonschema "
                "library, whose unevaluatedProperties matches patternProperties with "
                "Python's backtracking re: use additionalProperties instead of "
                "unevaluatedProperties, or drop patternProperties"
            )
        exact = exact_validator_class(cls)(doc)
    return CompiledSchema(doc, fast, exact)


_UNEVALUATED = frozenset({"unevaluatedProperties"})
_PATTERN_KEYS = frozenset({"patternProperties"})


def _fast_validator(doc: Any, label: str) -> Any:
    """The compiled jsonschema-rs validator, every regex on the linear engine; a regex
    that engine refuses is an error naming its JSON pointer (no backtracking fallback)."""
    try:  # Draft 2020-12 unless the schema names another draft
        return jsonschema_rs.validator_for(doc, validate_formats=False, pattern_options=LINEAR)
    except jsonschema_rs.ValidationError as exc:
        kind = exc.kind
        if isinstance(kind, jsonschema_rs.ValidationErrorKind.Format) and kind.format == "regex":
            pattern = str(exc.instance)
            where = locate(doc, exc.instance_path, pattern)
            raise InvalidSchemaError(regex_refusal(label, where, pattern)) from None
        raise InvalidSchemaError(f"{label} cannot be compiled: {exc}") from None
    except (ValueError, jsonschema_rs.ReferencingError) as exc:
        raise InvalidSchemaError(f"{label} cannot be compiled: {exc}") from None


class SchemaRegistry:
    """Tool name → compiled schema. Owned by one kernel."""

    __slots__ = ("_schemas",)

    def __init__(self) -> None:
        self._schemas: dict[str, CompiledSchema] = {}

    def register(self, tool: str, schema: Mapping[str, Any] | bool) -> CompiledSchema:
        if not tool:
            raise ValueError("a schema needs a tool name")
        compiled = compile_schema(schema, tool)
        self._schemas[tool] = compiled
        return compiled

    def remove(self, tool: str) -> None:
        self._schemas.pop(tool, None)

    def get(self, tool: str) -> CompiledSchema | None:
        return self._schemas.get(tool)

    def tools(self) -> list[str]:
        return sorted(self._schemas)

    def __contains__(self, tool: object) -> bool:
        return tool in self._schemas

    def __len__(self) -> int:
        return len(self._schemas)
