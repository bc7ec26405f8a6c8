"""Mutants of the proof harness's own theorems (``theorems/harness.md``): a cache that
trusts a result whose dependencies changed, shards that lose or overlap work, a merge that
loses a shard, mutant ids that move with the layout, and a thread the harness leaves an
exception pending on.

Each edits the plugin's source for the duration of a witness re-run
(:func:`tests.mutants.sourcepatch.edited`); the witnesses call the plugin's functions in
this process, so the edit reaches them.
"""

from __future__ import annotations

from typing import Any

from pytest_fak import ci, cli, generated, mutant, mutation, report, rootdir, selection
from pytest_fak.fingerprint import ReadLog
from pytest_fak.mutcache import CacheFile, MutantCache
from tests.mutants.sourcepatch import edited

__all__: list[str] = []


@mutant("H1.1/fingerprint-ignored")
def fingerprint_ignored() -> Any:
    """A cached outcome is reused whatever its witness's run depended on (the old key saw
    only the anchor's source and the witness's module)."""
    return edited(
        MutantCache.get,
        ("at == fp and fp in self.file.deps", "True"),
        ("return outcome if self.holds(at) else None", "return outcome"),
    )


@mutant("H1.1/reads-unrecorded")
def reads_unrecorded() -> Any:
    """The files a witness opens are not recorded: a data file it read is no dependency."""
    return edited(
        ReadLog.__dict__["_hook"].__func__,
        ("@classmethod\n", ""),
        ("cls._active[-1].add(os.path.abspath(path))", "pass"),
    )


@mutant("H1.1/check-blind-to-runs")
def check_blind_to_runs() -> Any:
    """``fak proofs check`` reads the fingerprints but never finds one changed."""
    return edited(cli.Fingerprints.changed, ("keys = stale_keys(deps, self.blocks)", "keys = []"))


@mutant("H1.2/one-shard-takes-all")
def one_shard_takes_all() -> Any:
    """Every theorem lands in the first shard: the others run nothing, and the first all."""
    return edited(selection.split, ("shards[i].add(t.id)", "shards[0].add(t.id)"))


@mutant("H1.2/merge-keeps-the-first")
def merge_keeps_the_first() -> Any:
    """Merging keeps only the first cache's results: the assembly re-runs the others'."""
    return edited(
        CacheFile.merge,
        ("mine = self.mutants.setdefault(k, {})", "mine: dict[str, tuple[str, str]] = {}"),
    )


@mutant("H1.2/merge-order-dependent")
def merge_order_dependent() -> Any:
    """The merge rule before: a kill replaces a survival, any other row already here is
    kept, so two shards that decided one pair differently merge by their order."""
    return edited(
        CacheFile.merge,
        (
            "(_rank(row[0]), row[1]) > (_rank(mine[n][0]), mine[n][1])",
            "(row[0] in KILLS and mine[n][0] not in KILLS)",
        ),
    )


@mutant("H1.2/merge-mixes-builds")
def merge_mixes_builds() -> Any:
    """A cache written by another build is folded in beside this build's results."""
    return edited(cli.merge_caches, ("elif got.build != merged.build:", "elif False:"))


@mutant("H1.3/layout-in-id")
def layout_in_id() -> Any:
    """A mutant's id reads the node's text as written, its spaces collapsed (the scheme
    before: parentheses a formatter adds, inside the node, changed the id)."""
    return edited(
        generated._normal,
        (
            "    text = _EMPTY.code_for_node(node)\n",
            '    text = _EMPTY.code_for_node(node)\n    return el + " ".join(text.split())\n',
        ),
    )


@mutant("H1.3/body-in-negated-test")
def body_in_negated_test() -> Any:
    """A negated ``if``'s id holds its whole body (the bug: a line re-wrapped in the body
    changed the id of the test's mutant)."""
    return edited(generated.generate, ('header = op == "negate-condition"', "header = False"))


@mutant("H1.4/exception-left-pending")
def exception_left_pending() -> Any:
    """A thread that did not take the exception raised into it within the grace keeps it
    (the bug: blocked in C, it never took it, and the next traced call spun for ever)."""
    return edited(mutation._interrupt_threads, ("        withdraw(targets)\n", ""))


@mutant("H1.5/path-option-moves-rootdir")
def path_option_moves_rootdir() -> Any:
    """The setup pytest decided before it knew the plugin's options stands (the bug:
    ``--fak-compare /elsewhere/prev.json`` moved the rootdir there)."""
    return edited(
        rootdir.repair, ("given = [o for o in PATH_OPTIONS if o in args]", "given: list[str] = []")
    )


@mutant("H1.6/unrun-witness-forgotten")
def unrun_witness_forgotten() -> Any:
    """A collected witness the run stopped before is not noted (the bug: ``-x`` made the
    theorem after the failure an orphan, OPEN, in a run not marked partial)."""
    return edited(
        selection.Selection.stopped_early,
        ("self.unrun = set(self.collected) - set(ran)", "self.unrun = set()"),
    )


@mutant("H1.7/empty-run-passes")
def empty_run_passes() -> Any:
    """A run that found no theorem passes (the bug: ``fak: 0 PROVEN``, exit 0)."""
    return edited(ci.nothing_to_prove, ("    if theorems or expected:\n", "    if True:\n"))


@mutant("H1.8/stale-carried-silently")
def stale_carried_silently() -> Any:
    """A carried verdict stays as it was whatever changed since (the bug: a partial run
    after an anchor changed passed with the theorem "PROVEN (carried over)")."""
    return edited(report._staleness, ("    if why is not None:\n", "    if False:\n"))
