"""Witnesses of H2 (``theorems/adoption.md``): what a downstream user meets first.

They call the plugin's functions in the proof run's own process, so a mutant of the
plugin reaches them: the near-miss check of a conftest's hook names (H2.1), the option
types of the mutant deadline and the example budgets (H2.2), the explicit ``@example`` a
failure came from (H2.3), and the usage error of generated mutants without libcst (H2.4).
The end-to-end runs are ordinary tests (``test_plugin_kernel_hook.py``,
``test_plugin_options.py``, ``test_plugin_install.py``, ``tests/packaging``).
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import math
import types
from typing import Any
from unittest import mock

import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from pytest_fak import extras, hookspecs, hyp, kernelhook, plugin

HOOKS = kernelhook.HOOKS
ALPHABET = "abcdefghijklmnopqrstuvwxyz_"


def _other_plugins_specs(config: Any) -> None:
    """A hook another plugin specifies under a name close to ours."""


def _manager() -> pytest.PytestPluginManager:
    pm = pytest.PytestPluginManager()  # pytest's own hook specifications
    hookspecs.add_to(pm)
    other = types.ModuleType("other_plugin_hookspecs")
    other.pytest_fak_make_kernels = _other_plugins_specs  # type: ignore[attr-defined]
    other.pytest_make_kernel = _other_plugins_specs  # type: ignore[attr-defined]
    pm.add_hookspecs(other)
    return pm


PM = _manager()
#: every hook with a specification here: pytest's and the plugin's
SPECIFIED = frozenset(
    n for n in dir(PM.hook) if n.startswith("pytest_") and getattr(PM.hook, n).spec is not None
)


def _plugin(**attrs: Any) -> types.ModuleType:
    mod = types.ModuleType("conftest")
    mod.__dict__.update(attrs)
    return mod


def _hook() -> None:
    return None


def _expected(name: str) -> str | None:
    """The hook a name nearly spells (the specification of H2.1), or None."""
    if not name.startswith("pytest_") or name in SPECIFIED:
        return None
    ratios = {h: difflib.SequenceMatcher(None, name, h).ratio() for h in HOOKS}
    top = max(ratios.values())
    best = next(h for h in HOOKS if ratios[h] == top)
    if top >= 0.8 or name.startswith("pytest_fak_"):
        return best
    return None


@st.composite
def one_edit(draw: st.DrawFn) -> str:
    """A hook's name with one letter inserted, deleted or replaced after ``pytest_``."""
    hook = draw(st.sampled_from(HOOKS))
    at = draw(st.integers(len("pytest_"), len(hook) - 1))
    letter = draw(st.sampled_from(ALPHABET))
    kind = draw(st.sampled_from(["insert", "delete", "replace"]))
    if kind == "insert":
        return hook[:at] + letter + hook[at:]
    if kind == "delete":
        return hook[:at] + hook[at + 1 :]
    return hook[:at] + letter + hook[at + 1 :]


names = st.one_of(
    one_edit(),
    st.text(ALPHABET, max_size=30).map(lambda t: "pytest_fak_" + t),
    st.text(ALPHABET, max_size=30).map(lambda t: "pytest_" + t),
    st.sampled_from(sorted(SPECIFIED)),
    st.text(ALPHABET, min_size=1, max_size=30),
)


@pytest.mark.fak_theorem("H2.1")
@settings(max_examples=300)
@given(name=names)
@example(name="pytest_fak_make_kernal")
@example(name="pytest_make_kernel")
@example(name="pytest_fak_")
@example(name="pytest_fak_make_kernel")
@example(name="pytest_collection_modifyitems")
@example(name="pytest_fak_theorem_dirs")
@example(name="pytest_xyke_kernel")  # a ratio of exactly 0.8 to pytest_fak_make_kernel
@example(name="test_fak_make_kernel")  # close, but pytest would not take it for a hook
@example(name="pytest_fak_make_kernels")  # specified by another plugin
def test_a_name_near_a_hook_is_named_with_the_hook(name: str) -> None:
    found = kernelhook.near_misses(_plugin(**{name: _hook}), PM)
    meant = _expected(name)
    assert found == ([] if meant is None else [(name, meant)])


@pytest.mark.fak_theorem("H2.1")
@given(name=st.one_of(one_edit(), st.text(ALPHABET, max_size=20).map("pytest_fak_".__add__)))
def test_only_functions_are_hooks(name: str) -> None:
    """A constant or a class attribute named like a hook is no implementation."""
    assert kernelhook.near_misses(_plugin(**{name: 3}), PM) == []
    assert kernelhook.near_misses(object(), PM) == []


@pytest.mark.fak_theorem("H2.1")
@given(picked=st.lists(st.one_of(one_edit(), st.sampled_from(HOOKS)), min_size=1, max_size=6))
def test_every_near_miss_of_a_plugin_is_named_in_name_order(picked: list[str]) -> None:
    plugin_ = _plugin(**{n: _hook for n in picked})
    want = sorted((n, m) for n in set(picked) if (m := _expected(n)) is not None)
    assert kernelhook.near_misses(plugin_, PM) == want


numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**6), 10**6).map(float),
    st.sampled_from([0.0, -0.0, 1e-300, 5e-324, -1e-300]),
)


@pytest.mark.fak_theorem("H2.2")
@given(x=numbers)
@example(x=0.0)
@example(x=-1.0)
@example(x=math.nan)
@example(x=math.inf)
@example(x=5e-324)
def test_a_deadline_is_a_finite_number_of_seconds_above_zero(x: float) -> None:
    raw = repr(x)
    if math.isfinite(x) and x > 0:
        assert plugin._seconds(raw) == x
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="finite number of seconds above 0"):
            plugin._seconds(raw)


@pytest.mark.fak_theorem("H2.2")
@given(raw=st.text(max_size=12))
@example(raw="soon")
@example(raw="")
def test_a_deadline_that_is_no_number_says_so(raw: str) -> None:
    try:
        value = float(raw)
    except ValueError:
        with pytest.raises(argparse.ArgumentTypeError, match="is not a number of seconds"):
            plugin._seconds(raw)
        return
    if math.isfinite(value) and value > 0:
        assert plugin._seconds(raw) == value
    else:
        with pytest.raises(argparse.ArgumentTypeError):
            plugin._seconds(raw)


@pytest.mark.fak_theorem("H2.2")
@given(raw=st.one_of(st.integers(-(10**9), 10**9).map(str), st.text(max_size=8)))
@example(raw="0")
@example(raw="1")
@example(raw="-1")
@example(raw="many")
def test_an_example_budget_is_a_whole_number_from_one(raw: str) -> None:
    parse = plugin._whole("--fak-mutant-examples")
    try:
        value = int(raw)
    except ValueError:
        with pytest.raises(argparse.ArgumentTypeError, match="is not a whole number"):
            parse(raw)
        return
    if value >= 1:
        assert parse(raw) == value
    else:
        with pytest.raises(
            argparse.ArgumentTypeError, match="--fak-mutant-examples must be at least 1"
        ):
            parse(raw)


#: Hypothesis's wording of a failing explicit example, today's and 6.151's
PREFIXES = ("Failing explicit example: ", "Falsifying explicit example: ")
prefixes = st.sampled_from(PREFIXES)
notes = st.one_of(
    st.text(max_size=10),
    st.tuples(prefixes, st.text(max_size=10)).map("".join),
    st.tuples(prefixes, st.text(max_size=10)).map(lambda pt: " " + pt[0] + pt[1]),
    st.tuples(prefixes, st.text(max_size=10)).map(lambda pt: pt[0][:-2] + pt[1]),
)


def _leaf(items: list[Any]) -> BaseException:
    e = AssertionError("leaf")
    e.__notes__ = list(items)  # a note that is no string too
    return e


trees = st.recursive(
    st.lists(st.one_of(notes, st.integers()), max_size=3).map(_leaf),
    lambda kids: st.tuples(st.lists(notes, max_size=2), st.lists(kids, min_size=1, max_size=3)).map(
        lambda nk: _group(*nk)
    ),
    max_leaves=8,
)


def _group(own: list[str], kids: list[BaseException]) -> BaseException:
    g = BaseExceptionGroup("several", kids)
    for n in own:
        g.add_note(n)
    return g


def _first(e: BaseException) -> str | None:
    """The first note naming an explicit example, as the tree reads (recursive)."""
    for n in getattr(e, "__notes__", []):
        for prefix in PREFIXES:
            if isinstance(n, str) and n.startswith(prefix):
                return n[len(prefix) :]
    for sub in e.exceptions if isinstance(e, BaseExceptionGroup) else ():
        if (found := _first(sub)) is not None:
            return found
    return None


@pytest.mark.fak_theorem("H2.3")
@given(tree=trees)
@example(tree=_leaf(["Failing explicit example: f(\n    x={'a: b': 1},\n)"]))
def test_the_first_explicit_example_in_the_tree_is_recorded(tree: BaseException) -> None:
    first = _first(tree)
    want = {} if first is None else {"falsifying_example": first, "explicit": True}
    assert hyp.explicit_failure(tree) == want


@pytest.mark.fak_theorem("H2.3")
@pytest.mark.parametrize("x", [0, -7, 123])
def test_hypothesis_own_explicit_failure_is_recorded(x: int) -> None:
    @given(st.just(0))
    @example(y=x)
    @settings(database=None, phases=[Phase.explicit])
    def failing(y: int) -> None:
        assert y != x

    with pytest.raises(AssertionError) as info:
        failing()
    assert hyp.explicit_failure(info.value) == {
        "falsifying_example": f"failing(\n    y={x},\n)",
        "explicit": True,
    }


features = st.one_of(
    st.sampled_from(["--fak-mutate=incremental", "--fak-mutate=full", "--fak-shard"]),
    st.text(max_size=20),
)


@pytest.mark.fak_theorem("H2.4")
@given(feature=features, absent=st.sampled_from(["none", "ImportError", "ValueError"]))
def test_generated_mutants_without_libcst_name_the_install(feature: str, absent: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        if name == "libcst":
            if absent == "none":
                return None
            raise {"ImportError": ImportError, "ValueError": ValueError}[absent](name)
        return real(name, *args)

    with (
        mock.patch.object(importlib.util, "find_spec", find_spec),
        pytest.raises(pytest.UsageError) as info,
    ):
        extras.require_mutate(feature)
    assert str(info.value) == (
        f"{feature} generates mutants with libcst, which is not installed: "
        "pip install 'pytest-fak[mutate]'"
    )


@pytest.mark.fak_theorem("H2.4")
@given(feature=features)
def test_with_libcst_generated_mutants_go_ahead(feature: str) -> None:
    assert importlib.util.find_spec("libcst") is not None  # the dev install has it
    assert extras.require_mutate(feature) is None
