"""The regular expressions of tool schemas, matched in linear time on both validation paths.

A tool schema's ``pattern``, ``patternProperties`` (and the ``additionalProperties`` that
depends on it) and ``propertyNames`` patterns run on argument text an attacker writes, so
they never go to a backtracking engine. There is one engine for them: the Rust ``regex``
crate inside ``jsonschema-rs`` (:data:`LINEAR`, its ``RegexOptions``), an automaton whose
matching is linear in the text. The compiled validator of rung 1 uses it for the whole
schema; the exact path (``jsonschema``, for schemas with ``multipleOf``) calls it for each
regex through :func:`exact_validator_class`, so the two paths read every pattern in the
same dialect (ECMA-262 as ``jsonschema-rs`` translates it) and give the same verdict.

A pattern the linear engine cannot take (backreferences, lookaround, atomic groups,
``\\Z``) is refused when the schema is registered: the error names
the JSON pointer of the pattern, says why (the detail comes from RE2, which refuses the
same constructs) and what to change. Nothing falls back to a backtracking engine.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
import jsonschema.validators
import jsonschema_rs
import re2
from jsonschema.exceptions import ValidationError

from fak_core.schemaequal import unique_items
from fak_core.schemaunevaluated import unevaluated_items, unevaluated_properties

__all__ = [
    "LINEAR",
    "LINEAR_KEYWORDS",
    "LinearPattern",
    "QUADRATIC_KEYWORDS",
    "exact_validator_class",
    "linear_pattern",
    "locate",
    "pointer",
    "regex_refusal",
]

#: The linear engine's options: jsonschema-rs's default engine is fancy-regex, which
#: backtracks on lookaround and backreferences; this one is Rust's ``regex`` crate.
LINEAR = jsonschema_rs.RegexOptions()

_HOW = (
    "tool schema patterns are matched against attacker-controlled arguments in linear time "
    "(Rust regex, ECMA-262 syntax): drop backreferences (\\1, \\k<name>), lookahead and "
    "lookbehind ((?=, (?!, (?<=, (?<!) and atomic groups ((?>...)), and write \\Z as $"
)


class LinearPattern:
    """One schema regex on the linear engine: ``search(text)`` as ECMA-262's ``test``."""

    __slots__ = ("_validator",)

    def __init__(self, pattern: str) -> None:
        # raises jsonschema_rs.ValidationError if the linear engine cannot compile it
        self._validator = jsonschema_rs.Draft202012Validator(
            {"pattern": pattern}, pattern_options=LINEAR
        )

    def search(self, text: str) -> bool:
        return bool(self._validator.is_valid(text))


@functools.lru_cache(maxsize=4096)
def linear_pattern(pattern: str) -> LinearPattern:
    """The compiled :class:`LinearPattern` of ``pattern`` (cached; refused ones raise)."""
    return LinearPattern(pattern)


def pointer(parts: Any) -> str:
    """An RFC 6901 JSON pointer from path parts (``""`` is the whole document)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def locate(doc: Any, parts: Any, pattern: str) -> str:
    """The pointer of ``pattern`` in ``doc``: ``parts`` if it leads there (jsonschema-rs
    reports paths inside an embedded ``$id`` resource relative to that resource), else
    the first place the pattern occurs as a ``pattern`` value or ``patternProperties`` key."""
    parts = list(parts)
    node: Any = doc
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if parts and isinstance(node, dict):  # a pattern's value, or a patternProperties key
        last = parts[-1]
        found = node.get(last) if last == "pattern" else (last if last in node else None)
        if found == pattern:
            return pointer(parts)
    found = next(_occurrences(doc, pattern, ()), None)
    return pointer(found if found is not None else parts)


def _occurrences(doc: Any, pattern: str, at: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "pattern" and value == pattern:
                yield (*at, key)
            elif key == "patternProperties" and isinstance(value, dict) and pattern in value:
                yield (*at, key, pattern)
            yield from _occurrences(value, pattern, (*at, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _occurrences(value, pattern, (*at, i))


def _why(pattern: str) -> str:
    options = re2.Options()
    options.log_errors = False
    try:
        re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return str(detail)
    return "the linear engine does not accept its syntax"


def regex_refusal(label: str, where: str, pattern: str) -> str:
    """The registration error for a schema regex the linear engine refuses."""
    return (
        f"{label}: the regular expression at {where or '/'} ({pattern!r}) cannot be matched "
        f"in linear time ({_why(pattern)}); {_HOW}"
    )


# ------------------------------------------------------- the exact path (jsonschema)
def _pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not linear_pattern(patrn).search(instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for patrn, subschema in patterns.items():
        compiled = linear_pattern(patrn)
        for key, value in instance.items():
            if compiled.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=patrn)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> Iterator[str]:
    properties = schema.get("properties", {})
    patterns = [linear_pattern(p) for p in schema.get("patternProperties", {})]
    for key in instance:
        if key not in properties and not any(p.search(key) for p in patterns):
            yield key


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = sorted(_additional(instance, schema), key=str)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield ValidationError(_extras_message(extras, schema))


def _extras_message(extras: list[str], schema: Mapping[str, Any]) -> str:
    """``jsonschema``'s message for properties ``additionalProperties: false`` refuses."""
    names = ", ".join(repr(e) for e in extras)
    if "patternProperties" in schema:
        verb = "does" if len(extras) == 1 else "do"
        patterns = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
        return f"{names} {verb} not match any of the regexes: {patterns}"
    verb = "was" if len(extras) == 1 else "were"
    return f"Additional properties are not allowed ({names} {verb} unexpected)"


#: The keywords whose ``jsonschema`` implementation calls Python's ``re`` on the instance.
LINEAR_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}

#: The keywords whose ``jsonschema`` implementation is quadratic in the arguments (A7.7).
QUADRATIC_KEYWORDS = {
    "uniqueItems": unique_items,
    "unevaluatedItems": unevaluated_items,
    "unevaluatedProperties": unevaluated_properties,
}


@functools.cache
def exact_validator_class(cls: type[Any]) -> type[Any]:
    """``cls`` (a ``jsonschema`` validator class) with every regex on the linear engine and
    the keywords ``jsonschema`` runs in quadratic time (:data:`QUADRATIC_KEYWORDS`) linear.

    ``unevaluatedProperties`` still matches ``patternProperties`` with ``re`` inside
    ``jsonschema``; :func:`fak_core.schemas.compile_schema` refuses that combination on
    this path."""
    keywords = {**LINEAR_KEYWORDS, **QUADRATIC_KEYWORDS}
    return jsonschema.validators.extend(cls, keywords)  # type: ignore[no-any-return]
