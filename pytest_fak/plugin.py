"""The pytest entry point: options, the ``fak_theorem`` marker, hookspecs, fixtures.

Import-light on purpose: nothing from ``fak_core``, Hypothesis or coverage is imported
here. Proof mode (``--fak-theorems``) registers :class:`pytest_fak.proof.ProofSession`;
without it the plugin only registers its marker and fixtures, so marked tests run as
ordinary tests.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_fak import fixtures, hookspecs, kernelhook, rootdir
from pytest_fak.paths import PACK_DIR

__all__ = ["DEFAULT_FAIL_ON", "DEFAULT_MUTANT_EXAMPLES", "PACK_DIR"]

DEFAULT_FAIL_ON = "REFUTED,VACUOUS,OPEN,STALE,ERROR"
DEFAULT_MUTANT_EXAMPLES = 25


def _whole(option: str) -> Callable[[str], int]:
    """An argparse type: a whole number of examples, at least 1."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number of examples") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{raw!r}: {option} must be at least 1")
        return value

    return parse


def _seconds(raw: str) -> float:
    """An argparse type: a deadline in seconds, finite and above 0."""
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"{raw!r}: the deadline must be a finite number of seconds above 0 (e.g. 5)"
        )
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fak", "fak theorem proofs")
    group.addoption(
        "--fak-theorems",
        action="store_true",
        default=False,
        help="proof mode: bind witnesses to theorems, run mutants, write the verdict report",
    )
    group.addoption(
        "--fak-theorems-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory of theorem documents (repeatable; default: ini fak_theorems_dirs, "
        "else theorems/)",
    )
    group.addoption(
        "--fak-theorem",
        action="append",
        default=[],
        metavar="ID",
        help="run only these theorems (repeatable; globs like 'D10.*'): their witnesses and "
        "mutants run, every other theorem keeps its last verdict in the report (carried over)",
    )
    group.addoption(
        "--fak-compare",
        default=None,
        metavar="PATH",
        help="print how each verdict changed against a committed verdicts.json "
        "(e.g. PROVEN -> REFUTED, new, removed)",
    )
    group.addoption(
        "--fak-report-dir",
        default="proofs",
        metavar="DIR",
        help="where verdicts.json and PROOFS.md are written (default: proofs/)",
    )
    group.addoption(
        "--fak-fail-on",
        default=None,
        metavar="VERDICTS",
        help="comma-separated verdicts that fail the run, or 'none' (default: ini "
        f"fak_fail_on, else {DEFAULT_FAIL_ON})",
    )
    group.addoption(
        "--fak-pack",
        action="store_true",
        default=False,
        help="also run the bundled theorem pack (ladder, fold, fail-closed) against the "
        "kernel from pytest_fak_make_kernel",
    )
    group.addoption(
        "--fak-mutant-examples",
        type=_whole("--fak-mutant-examples"),
        default=None,
        metavar="N",
        help="Hypothesis example budget of a witness re-run under a mutant (default: ini "
        f"fak_mutant_examples, else {DEFAULT_MUTANT_EXAMPLES})",
    )
    group.addoption(
        "--fak-max-examples",
        type=_whole("--fak-max-examples"),
        default=None,
        metavar="N",
        help="cap every witness at N Hypothesis examples in proof mode, its own @settings "
        "included (default: the 'fak' profile uses Hypothesis's default)",
    )
    group.addoption(
        "--fak-mutate",
        choices=("off", "incremental", "full"),
        default=None,
        help="generated mutants of every anchor: 'incremental' re-runs only the results whose "
        "fingerprint (the code and files the witness depended on) changed since the cache, "
        "'full' ignores the cache, 'off' skips them (default: ini fak_mutate, else off)",
    )
    group.addoption(
        "--fak-shard",
        default=None,
        metavar="K/N",
        help="run only shard K of N (1-based) of the theorems, split by their generated "
        "mutants so each shard gets a like share; merge the shards' caches with "
        "'fak cache merge' and run once more to assemble the report",
    )
    group.addoption(
        "--fak-mutant-timeout",
        type=_seconds,
        default=5.0,
        metavar="S",
        help="a witness re-run under a generated mutant is stopped after max(S, 10x its own "
        "run time) and the mutant counts as killed by timeout (default: 5)",
    )
    group.addoption(
        "--fak-mutant-memory",
        default=None,
        metavar="SIZE",
        help="address space a witness re-run under a mutant may add to the process (RLIMIT_AS; "
        "e.g. 512M, 2G, or 'off'); a MemoryError under it kills the mutant (default: ini "
        "fak_mutant_memory, else 2G; no limit where the platform has no RLIMIT_AS)",
    )
    group.addoption(
        "--fak-cache-dir",
        default=None,
        metavar="DIR",
        help="where generated-mutant results are cached (default: ini fak_cache_dir, "
        "else .fak-cache in the rootdir)",
    )
    group.addoption(
        "--fak-fail-under",
        action="append",
        default=[],
        metavar="SCORE|ID=SCORE",
        help="adopt generated mutants gradually: the run fails when the mutation score "
        "(killed / (generated - waived), in percent) is under SCORE, overall or for theorem "
        "ID (repeatable); a theorem VACUOUS only by generated survivors is still reported "
        "VACUOUS but no longer fails the run by itself (default: no threshold, every "
        "survivor fails the run)",
    )
    group.addoption(
        "--fak-mutate-installed",
        action="store_true",
        default=False,
        help="also generate mutants of anchors in installed packages (site-packages, "
        "dist-packages, the interpreter's folders); by default only the project's own code "
        "is mutated and the report lists what was left out (ini fak_mutate_installed)",
    )
    group.addoption(
        "--fak-no-theorems-ok",
        action="store_true",
        default=False,
        help="a proof run that finds no theorem passes (default: it fails with exit code 5, "
        "like pytest's 'no tests collected'; ini fak_no_theorems_ok)",
    )
    parser.addini(
        "fak_mutate_installed",
        type="bool",
        default=False,
        help="default of --fak-mutate-installed",
    )
    parser.addini(
        "fak_no_theorems_ok",
        type="bool",
        default=False,
        help="default of --fak-no-theorems-ok",
    )
    parser.addini(
        "fak_mutate",
        type="string",
        default="",
        help="default of --fak-mutate (off, incremental or full)",
    )
    parser.addini(
        "fak_fail_on",
        type="string",
        default="",
        help=f"default of --fak-fail-on (default: {DEFAULT_FAIL_ON})",
    )
    parser.addini(
        "fak_mutant_examples",
        type="string",
        default="",
        help=f"default of --fak-mutant-examples (default: {DEFAULT_MUTANT_EXAMPLES})",
    )
    parser.addini(
        "fak_mutant_memory",
        type="string",
        default="",
        help="default of --fak-mutant-memory (e.g. 2G, 512M, off)",
    )
    parser.addini(
        "fak_cache_dir",
        type="string",
        default="",
        help="default of --fak-cache-dir",
    )
    parser.addini(
        "fak_max_examples",
        type="string",
        default="",
        help="default of --fak-max-examples (the example cap of every witness in proof mode)",
    )
    parser.addini(
        "fak_theorems_dirs",
        type="paths",
        default=[],
        help="directories of theorem documents (default: theorems/)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    """``--fak-compare PATH`` must not move the rootdir (:mod:`pytest_fak.rootdir`)."""
    rootdir.repair(early_config, args)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    hookspecs.add_to(pluginmanager)


def pytest_plugin_registered(plugin: object, manager: pytest.PytestPluginManager) -> None:
    """A conftest function whose name nearly spells one of the plugin's hooks is a usage
    error naming the hook (pytest ignores it silently when marked ``optionalhook``)."""
    where = getattr(plugin, "__file__", None)
    if not where or Path(where).name != "conftest.py":
        return
    for name, hook in kernelhook.near_misses(plugin, manager):
        raise pytest.UsageError(
            f"{where}: {name} is not a pytest_fak hook, and pytest would ignore it; "
            f"did you mean {hook}? (the hooks: {', '.join(kernelhook.HOOKS)})"
        )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fak_theorem(id, *more_ids): bind this test as a witness of documented theorems "
        "(see pytest --fak-theorems)",
    )
    if not config.pluginmanager.is_registered(fixtures):
        config.pluginmanager.register(fixtures, "fak-fixtures")
    if config.getoption("fak_pack") and config.args_source != pytest.Config.ArgsSource.ARGS:
        # With no explicit test arguments the whole pack runs; otherwise only what is named
        # (e.g. --pyargs pytest_fak.pack.witness_fold::test_fold_picks_most_restrictive).
        config.args.append(str(PACK_DIR))
    if config.getoption("fak_theorems"):
        from pytest_fak import mutant_examples
        from pytest_fak.proof import ProofSession

        config.pluginmanager.register(ProofSession(config), "fak-proof")
        config.pluginmanager.register(mutant_examples, "fak-mutant-examples")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect the bundled pack's ``witness_*.py`` modules when ``--fak-pack`` is on."""
    if (
        parent.config.getoption("fak_pack")
        and file_path.suffix == ".py"
        and file_path.name.startswith("witness_")
        and file_path.parent == PACK_DIR
    ):
        return pytest.Module.from_parent(parent, path=file_path)
    return None
