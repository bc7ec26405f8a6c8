"""D2.6: a policy pattern RE2 refuses is refused through the error alone; RE2 writes
nothing of it to the process's standard error (its logging is turned off).

The oracle is the captured file descriptor 2, which RE2's C++ logger writes to.
"""

from __future__ import annotations

import json

import pytest

from fak_core import PolicyError, load_policy

REFUSED = ("(a)\\1", "(?=a)b", "a++", "(?>a)")


@pytest.mark.fak_theorem("D2.6")
@pytest.mark.parametrize("pattern", REFUSED)
def test_a_refused_pattern_is_named_in_the_error_and_not_logged(
    pattern: str, capfd: pytest.CaptureFixture[str]
) -> None:
    doc = json.dumps({"secret_patterns": [pattern]})
    with pytest.raises(PolicyError, match=r"secret_patterns\[0\]"):
        load_policy(doc, "json")
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
