"""D2.3: a rate limit's window is a finite number of seconds, or the policy is refused.

TOML spells infinity and NaN (``inf``, ``+inf``, ``-inf``, ``nan``), Python's JSON reader
accepts ``Infinity`` and ``NaN``, reads ``1e400`` as infinity, and reads an integer of any
length; a window of none of these means one thing, so each is refused naming
``rate_limit.window_s``. The oracle is hand-written: the error's prefix (the key, as D2.3
states it) and, for the finite windows at the edges of a double, the value written.
"""

from __future__ import annotations

import pytest

from fak_core.policy import PolicyError, load_policy

KEY = "policy: policy key 'rate_limit.window_s'"
#: windows TOML can write that are no finite number of seconds > 0
TOML_BAD = ["inf", "+inf", "-inf", "nan", "+nan", "-nan"]
#: the same in JSON, as Python's reader takes them, and integers beyond any double
JSON_BAD = [
    "Infinity",
    "-Infinity",
    "NaN",
    "1e400",
    "-1e400",
    "1" + "0" * 400,
    "-" + "1" + "0" * 400,
    str(2**1024),
]
#: finite windows at the edges, with the seconds they mean (written out by hand)
GOOD = [
    ("5e-324", 5e-324),
    ("1.7976931348623157e308", 1.7976931348623157e308),
    ("1" + "0" * 308, 1e308),
    (str(2**1024 - 2**971), 1.7976931348623157e308),
    ("7", 7.0),
    ("0.25", 0.25),
]


def _toml(window: str) -> str:
    return f'allow = ["a"]\n[rate_limit]\nmax_calls = 2\nwindow_s = {window}\n'


def _json(window: str) -> str:
    return '{"allow": ["a"], "rate_limit": {"max_calls": 2, "window_s": ' + window + "}}"


@pytest.mark.fak_theorem("D2.3")
@pytest.mark.parametrize(
    ("fmt", "window"), [("toml", w) for w in TOML_BAD] + [("json", w) for w in JSON_BAD]
)
def test_a_window_that_is_no_finite_number_is_refused_naming_it(fmt: str, window: str) -> None:
    text = _toml(window) if fmt == "toml" else _json(window)
    with pytest.raises(PolicyError) as info:
        load_policy(text, fmt)
    assert str(info.value).startswith(KEY), str(info.value)


@pytest.mark.fak_theorem("D2.3")
@pytest.mark.parametrize(("window", "seconds"), GOOD)
def test_a_finite_window_at_the_edges_of_a_double_is_read_as_written(
    window: str, seconds: float
) -> None:
    policy = load_policy(_json(window), "json")
    assert policy.rate_limit is not None
    assert policy.rate_limit.window_s == seconds
    assert type(policy.rate_limit.window_s) is float
    if len(window) < 20:  # TOML integers stop at 2**63 - 1
        again = load_policy(_toml(window), "toml")
        assert again.rate_limit == policy.rate_limit
