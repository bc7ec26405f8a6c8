"""JSON Schema's equality of instances, decided in linear time (``uniqueItems`` on the exact path).

``jsonschema``'s ``uniqueItems`` sorts the items when it can and otherwise compares every
pair: 1,000 small objects took 6.9 s and a 1 MiB argument would run for hours. Here each
item gets a canonical key (:func:`canonical`) in one pass over it, and the keys go into a
set: linear in the size of the array (expected, under Python's randomised string hashing:
every leaf of a key is a ``str``, so an attacker cannot choose colliding hashes as they
can for ``int`` hashes).

Two instances have equal keys exactly when JSON Schema calls them equal: numbers by
mathematical value (``1``, ``1.0`` and ``-0.0``/``0`` equal; a big integer equals a float
only if the float is exactly that integer), ``true``/``false`` never equal to ``1``/``0``,
strings by code points, arrays item by item in order, objects by key set and values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from jsonschema.exceptions import ValidationError

__all__ = ["canonical", "duplicate", "unique_items"]


def _number(value: int | float) -> str:
    if isinstance(value, float):
        if not value.is_integer():  # a fraction, or ±inf: repr is one per float value
            return "f" + repr(value)
        value = int(value)  # -0.0 → 0, 1e300 → its integer (at most 309 digits)
    return "i" + format(value, "x")  # hex: exact, linear, no int-to-str digit limit


def canonical(value: Any) -> Any:
    """A hashable key, equal for two JSON values exactly when JSON Schema calls them equal."""
    if value is True:
        return "t"
    if value is False:
        return "F"
    if value is None:
        return "z"
    if isinstance(value, str):
        return "s" + value
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, Mapping):
        return frozenset((key, canonical(item)) for key, item in value.items())
    if isinstance(value, Sequence):
        return ("a", *(canonical(item) for item in value))
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def duplicate(items: Sequence[Any]) -> tuple[int, int] | None:
    """The indexes ``(i, j)``, ``i < j``, of the first item equal to an earlier one."""
    seen: dict[Any, int] = {}
    for j, item in enumerate(items):
        i = seen.setdefault(canonical(item), j)
        if i != j:
            return i, j
    return None


def unique_items(validator: Any, ui: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """``uniqueItems`` for ``jsonschema`` (its message, led by which items are equal)."""
    if ui and validator.is_type(instance, "array"):
        pair = duplicate(instance)
        if pair is not None:
            i, j = pair
            yield ValidationError(
                f"items {i} and {j} are equal: {instance!r} has non-unique elements"
            )
