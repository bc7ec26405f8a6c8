"""A7.6: a schema regex the linear engine refuses is refused saying why: RE2's own detail
for a construct RE2 cannot run (written out here as RE2 words it), else that the linear
engine does not accept its syntax (a pattern RE2 reads but the ``regex`` crate refuses).
"""

from __future__ import annotations

import pytest

from fak_core.schemas import InvalidSchemaError, compile_schema

WHY = [
    ("a(?=b)", "invalid perl operator: (?="),
    ("\u00e9(?<!x)b", "invalid perl operator: (?<!"),
    ("(\u00e9)\\1", "invalid escape sequence: \\1"),
    ("a{,3}", "the linear engine does not accept its syntax"),
    ("\\0", "the linear engine does not accept its syntax"),
]


@pytest.mark.fak_theorem("A7.6")
@pytest.mark.parametrize(("pattern", "why"), WHY)
def test_a_refused_pattern_says_why(pattern: str, why: str) -> None:
    with pytest.raises(InvalidSchemaError) as caught:
        compile_schema({"properties": {"a": {"pattern": pattern}}}, "t")
    message = str(caught.value)
    head = (
        f"schema for tool 't': the regular expression at /properties/a/pattern ({pattern!r}) "
        f"cannot be matched in linear time ({why}); "
    )
    assert message.startswith(head), message
