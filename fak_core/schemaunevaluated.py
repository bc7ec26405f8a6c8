"""``unevaluatedItems`` and ``unevaluatedProperties`` for the exact path, linear in the arguments.

``jsonschema`` collects the evaluated item indexes (property names) in a list and then
asks, for every item (property), whether it is in that list: quadratic (1 MiB of integers
under ``unevaluatedItems`` took 156 s). These are the same keywords with the collected
indexes (names) in a set; the collection, the verdicts and the messages are ``jsonschema``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jsonschema._utils import (
    extras_msg,
    find_evaluated_item_indexes_by_schema,
    find_evaluated_property_keys_by_schema,
)
from jsonschema.exceptions import ValidationError

__all__ = ["unevaluated_items", "unevaluated_properties"]


def unevaluated_items(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "array"):
        return
    evaluated = set(find_evaluated_item_indexes_by_schema(validator, instance, schema))
    extras = [item for index, item in enumerate(instance) if index not in evaluated]
    if extras:
        error = "Unevaluated items are not allowed (%s %s unexpected)"
        yield ValidationError(error % extras_msg(extras))


def unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = set(find_evaluated_property_keys_by_schema(validator, instance, schema))
    extras = [
        key
        for key in instance
        if key not in evaluated
        and next(
            iter(validator.descend(instance[key], unevaluated, path=key, schema_path=key)),
            None,
        )
        is not None
    ]
    if not extras:
        return
    if unevaluated is False:
        error = "Unevaluated properties are not allowed (%s %s unexpected)"
        yield ValidationError(error % extras_msg(sorted(extras, key=str)))
    else:
        error = (
            "Unevaluated properties are not valid under "
            "the given schema (%s %s unevaluated and invalid)"
        )
        yield ValidationError(error % extras_msg(extras))
