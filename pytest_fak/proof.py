"""Proof mode: the per-run plugin object registered by ``--fak-theorems``.

On every process (controller, xdist workers, or a plain run) it loads the theorem
documents, validates ``fak_theorem`` markers at collection, measures each bound
witness (anchors, Hypothesis examples), and re-runs each passing witness under its
theorems' mutants (each re-run inside an address-space budget, :mod:`pytest_fak.crash`).
Per-test facts, the anchors each witness executed included, travel on the test reports
(plain JSON) as each test finishes, so an xdist worker that dies loses at most the test it
was running; for that test the worker's "mutant in flight" marker tells the controller
which mutant crashed it. On the controller it folds the evidence into verdicts, writes
the report and sets the exit status from ``--fak-fail-on``.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_fak import ci, crash, extras, hyp, inputs, kernelhook, rebuild, report, verdicts
from pytest_fak.anchors import AnchorProbe, unmeasured
from pytest_fak.build import build_id
from pytest_fak.fingerprint import (
    ReadLog,
    digest,
    installed_dirs,
    installed_file,
    project_blocks,
)
from pytest_fak.mutants import registry
from pytest_fak.mutation import (
    MODES,
    TIMEOUT,
    GeneratedPhase,
    MutantQuarantine,
    MutantTimeout,
    deadline,
    interrupt_mutant,
    stop_mutant_threads,
)
from pytest_fak.paths import PACK_DIR
from pytest_fak.plugin import DEFAULT_FAIL_ON, DEFAULT_MUTANT_EXAMPLES
from pytest_fak.provenance import git_info
from pytest_fak.selection import Selection, marker_ids
from pytest_fak.survivors import click_path
from pytest_fak.symbols import SymbolError
from pytest_fak.theorems import Theorem, TheoremError, TheoremIndex, load_theorems

__all__ = ["ProofSession"]


def _max_examples(config: pytest.Config) -> int | None:
    """``--fak-max-examples``, else the ``fak_max_examples`` ini value, else None."""
    given = config.getoption("fak_max_examples")
    if given is not None:
        return int(given)
    raw = str(config.getini("fak_max_examples") or "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise pytest.UsageError(
            f"ini option fak_max_examples = {raw!r}: expected a whole number of examples"
        ) from None
    if value < 1:
        raise pytest.UsageError("ini option fak_max_examples must be at least 1")
    return value


def _mutant_examples(config: pytest.Config) -> int:
    """``--fak-mutant-examples``, else the ``fak_mutant_examples`` ini value, else 25."""
    given = config.getoption("fak_mutant_examples")
    if given is not None:
        return int(given)
    raw = str(config.getini("fak_mutant_examples") or "").strip()
    if not raw:
        return DEFAULT_MUTANT_EXAMPLES
    try:
        value = int(raw)
    except ValueError:
        raise pytest.UsageError(
            f"ini option fak_mutant_examples = {raw!r}: expected a whole number of examples"
        ) from None
    if value < 1:
        raise pytest.UsageError("ini option fak_mutant_examples must be at least 1")
    return value


def _mutant_memory(config: pytest.Config) -> int | None:
    """``--fak-mutant-memory``, else ini ``fak_mutant_memory``, else 2 GiB (None: off)."""
    raw = config.getoption("fak_mutant_memory") or config.getini("fak_mutant_memory")
    raw = str(raw or "").strip() or crash.DEFAULT_MUTANT_MEMORY
    try:
        return crash.parse_size(raw)
    except ValueError as exc:
        raise pytest.UsageError(f"fak_mutant_memory / --fak-mutant-memory: {exc}") from None


_THEOREMS = pytest.StashKey[tuple[str, ...]]()
_EVIDENCE = pytest.StashKey[dict[str, Any]]()


_marker_ids = marker_ids

#: Hypothesis exceptions that mean the witness never tested the code (ERROR, not REFUTED)
_HYPOTHESIS_SETUP_ERRORS = (
    "FailedHealthCheck",
    "Unsatisfiable",
    "InvalidArgument",
    "InvalidDefinition",
    "ResolutionFailed",
)


def _error_kind(excinfo: pytest.ExceptionInfo[BaseException] | None) -> str | None:
    """``"hypothesis: <Error>"`` when the call failed because Hypothesis refused to run
    the witness (a health check, unsatisfiable assumptions, invalid settings)."""
    if excinfo is None or "hypothesis" not in sys.modules:
        return None
    import hypothesis.errors as herr

    kinds = tuple(getattr(herr, n) for n in _HYPOTHESIS_SETUP_ERRORS if hasattr(herr, n))
    exc = excinfo.value
    if isinstance(exc, kinds):
        return f"hypothesis: {type(exc).__name__}"
    return None


class ProofSession:
    """The proof-mode plugin object (one per pytest process)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        self.rootpath = config.rootpath
        self.dirs = self._theorem_dirs()
        self.index, self.errors = load_theorems(self.dirs)
        self.selection = Selection(config, self.index, _mutant_weight())
        # without proof mode the mutant modules are not imported: the user's coverage
        # gets what importing them ran elsewhere, nothing of their own lines
        with unmeasured(self._mutant_module_files):
            self._import_mutant_modules()
        self.fail_on = self._fail_on()
        self.fail_under = self._fail_under()
        self.mutant_examples = _mutant_examples(config)
        self.mutant_memory = _mutant_memory(config)
        flight = getattr(config, "workerinput", {}).get("fak_flight")
        self.recorder = crash.FlightRecorder(flight) if flight else None
        self.flight_dir: Path | None = None
        self.crashes: list[dict[str, Any]] = []
        self.max_examples = _max_examples(config)
        self.evidence: dict[str, verdicts.WitnessEvidence] = {}
        self.bound: dict[str, list[str]] = {}
        self.unknown: list[str] = []
        self.result: dict[str, Any] | None = None
        self.written: list[Path] = []
        self.mutate = self._mutate_mode()
        if self.mutate != "off":
            extras.require_mutate(f"--fak-mutate={self.mutate}")
        files = {a.filename for t in self.index for a in t.anchors}
        #: the project's code and data a witness's run depends on (its fingerprint)
        self.blocks = project_blocks(self.rootpath, self._cache_dir(), self._report_dir())
        if self.mutate == "off":
            self.probe = AnchorProbe(files)
        else:
            self.probe = AnchorProbe(files, [f"{self.rootpath}{os.sep}*"], _installed_code())
        self.reads: dict[str, ReadLog] = {}
        self.deps: dict[str, dict[str, str]] = {}
        self.modes: set[str] = set()
        self.session_items: list[pytest.Item] = []
        self._hyp_saved: Any = None
        self._obs_cov_saved: Any = None
        self._setup_hypothesis()
        self.quarantine = MutantQuarantine()
        self.generated: GeneratedPhase | None = None
        self.cache_written: Path | None = None
        if self.mutate != "off" and not self.errors:
            chosen = TheoremIndex(t for t in self.index if self.selection.wants(t.id))
            root = self.rootpath
            own = None if self._mutate_installed() else (lambda f: not installed_file(f, root))
            self.generated = GeneratedPhase(
                chosen, self.mutate, self._cache_dir(), self._budget(), self.blocks, own
            )
            self.errors += self.generated.errors
        self.collect_only = bool(config.getoption("collectonly"))
        self.committed: dict[str, Any] | None = None
        self.transitions: list[str] = []
        self.last_line: str | None = None
        self.annotations: list[str] = []
        self.mutant_sources: dict[str, Any] = {}
        self.git: dict[str, Any] = {}
        if not self.is_worker:
            cmp = config.getoption("fak_compare")
            if cmp:
                path = Path(str(cmp))
                path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
                self.committed = ci.load_committed(path)
            # the state the run starts from, before it writes anything
            self.git = git_info(self.rootpath, *self._own_files())
            config.pluginmanager.register(_LastLine(self), "fak-last-line")

    # ------------------------------------------------------------------ configuration
    def _theorem_dirs(self) -> list[Path]:
        cfg = self.config
        dirs = [Path(d) for d in cfg.getoption("fak_theorems_dir")]
        dirs = [d if d.is_absolute() else Path(cfg.invocation_params.dir) / d for d in dirs]
        if not dirs:
            dirs = [Path(p) for p in cfg.getini("fak_theorems_dirs")]
        if not dirs and (self.rootpath / "theorems").is_dir():
            dirs = [self.rootpath / "theorems"]
        for extra in cfg.hook.pytest_fak_theorem_dirs(config=cfg):
            dirs += [Path(d) for d in extra]
        if cfg.getoption("fak_pack"):
            dirs.append(PACK_DIR / "theorems")
        seen: list[Path] = []
        for d in dirs:
            if d.resolve() not in [s.resolve() for s in seen]:
                seen.append(d)
        return seen

    def _fail_on(self) -> set[str]:
        raw = self.config.getoption("fak_fail_on")
        if raw is None:
            raw = str(self.config.getini("fak_fail_on") or "").strip() or DEFAULT_FAIL_ON
        raw = str(raw)
        if raw.strip().lower() == "none":
            return set()
        words = {w.strip().upper() for w in raw.split(",") if w.strip()}
        bad = words - set(verdicts.VERDICTS)
        if bad:
            raise pytest.UsageError(
                f"--fak-fail-on: unknown verdict(s) {', '.join(sorted(bad))}; "
                f"use a comma list of {', '.join(verdicts.VERDICTS)} or 'none'"
            )
        return words

    def _mutate_installed(self) -> bool:
        """``--fak-mutate-installed`` or ini ``fak_mutate_installed``."""
        return bool(self.config.getoption("fak_mutate_installed")) or bool(
            self.config.getini("fak_mutate_installed")
        )

    def _fail_under(self) -> tuple[float | None, dict[str, float]] | None:
        """``--fak-fail-under``: (the overall score, theorem id → its score), in percent;
        ``None`` when not given (every survivor fails the run through its verdict)."""
        given = [str(v).strip() for v in self.config.getoption("fak_fail_under") or []]
        if not given:
            return None
        overall: float | None = None
        per: dict[str, float] = {}
        for raw in given:
            tid, _, value = raw.rpartition("=")
            try:
                score = float(value.removesuffix("%"))
            except ValueError:
                score = -1.0
            if not 0 <= score <= 100:
                raise pytest.UsageError(
                    f"--fak-fail-under {raw}: write a mutation score in percent (0-100), "
                    "overall (e.g. 80) or for one theorem (e.g. C4.1=95)"
                )
            if not tid:
                overall = score
            elif tid not in self.index:
                known = ", ".join(sorted(self.index.by_id)[:12]) or "none loaded"
                raise pytest.UsageError(
                    f"--fak-fail-under {raw}: no theorem {tid!r} (known: {known})"
                )
            else:
                per[tid] = score
        return overall, per

    def _mutate_mode(self) -> str:
        raw = self.config.getoption("fak_mutate") or self.config.getini("fak_mutate") or "off"
        mode = str(raw).strip().lower()
        if mode not in MODES:
            raise pytest.UsageError(
                f"fak_mutate = {raw!r}: use one of {', '.join(MODES)} (default: off)"
            )
        return mode

    def _cache_dir(self) -> Path:
        raw = self.config.getoption("fak_cache_dir") or self.config.getini("fak_cache_dir")
        d = Path(str(raw or ".fak-cache"))
        return d if d.is_absolute() else self.rootpath / d

    def _budget(self) -> str:
        """What a cached mutant outcome depends on besides the code and the witness."""
        from importlib import metadata

        try:
            hv = metadata.version("hypothesis")
        except metadata.PackageNotFoundError:  # pragma: no cover - a dependency
            hv = "none"
        return (
            f"pytest-fak {build_id()}; hypothesis {hv}; "
            f"mutant-examples {self.mutant_examples}; max-examples {self.max_examples}; "
            f"mutant-memory {self.mutant_memory}"
        )

    def _mutant_module_files(self) -> list[str]:
        names = {m for t in self.index for m in t.mutant_modules}
        mods = [sys.modules.get(n) for n in names]
        return [str(f) for m in mods if m is not None and (f := getattr(m, "__file__", None))]

    def _import_mutant_modules(self) -> None:
        for name in sorted({m for t in self.index for m in t.mutant_modules}):
            try:
                if name in sys.modules:
                    importlib.reload(sys.modules[name])
                else:
                    importlib.import_module(name)
            except Exception as exc:
                t = next(t for t in self.index if name in t.mutant_modules)
                self.errors.append(
                    TheoremError(t.path, 1, f"mutant module {name!r} failed to import: {exc}")
                )

    def _setup_hypothesis(self) -> None:
        try:
            import hypothesis.internal.observability as obs
            from hypothesis import settings
        except ImportError:  # pragma: no cover - hypothesis is a dependency
            return
        self._hyp_saved = settings.get_current_profile_name()
        hyp.register_profiles(self.mutant_examples, self.max_examples, self._hyp_saved)
        hyp.load_profile(hyp.PROFILE)
        # Observability's own line tracer is slow on 3.11 and we measure lines ourselves.
        self._obs_cov_saved = obs.OBSERVABILITY_COLLECT_COVERAGE
        obs.OBSERVABILITY_COLLECT_COVERAGE = False

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._hyp_saved is not None:
            import hypothesis.internal.observability as obs

            hyp.load_profile(self._hyp_saved)
            obs.OBSERVABILITY_COLLECT_COVERAGE = self._obs_cov_saved
        registry.clear()
        self.quarantine.uninstall()
        if self.recorder is not None:
            self.recorder.close()
        if self.flight_dir is not None:
            shutil.rmtree(self.flight_dir, ignore_errors=True)

    def pytest_report_header(self, config: pytest.Config) -> str:
        rel = [report.relpath(d, self.rootpath) for d in self.dirs]
        return (
            f"fak: proof mode, {len(self.index)} theorems from {', '.join(rel) or '(none)'}, "
            f"hypothesis profile {hyp.describe(self._hyp_saved or 'default')}"
        )

    # ------------------------------------------------------------------ collection
    def _problems_for(self, item: pytest.Item) -> list[str]:
        ids, problems = _marker_ids(item)
        for tid in ids:
            t = self.index.get(tid)
            if t is None:
                known = ", ".join(sorted(self.index.by_id)[:12]) or "none loaded"
                problems.append(
                    f"unknown theorem id {tid!r} in @pytest.mark.fak_theorem; fix the id or "
                    f"add the theorem to a theorems document (known: {known})"
                )
                continue
            for m in t.mutants:
                if registry.get(m.id) is None:
                    problems.append(
                        f"mutant {m.id} (declared at {report.relpath(t.path, self.rootpath)}:"
                        f"{m.line}) has no implementation; decorate a context-manager factory "
                        f"with @pytest_fak.mutant({m.id!r}) in a conftest.py, in this module, "
                        "or in a module the document lists under **MUTANT-MODULES.**"
                    )
        return problems

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        rep = yield
        if isinstance(collector, pytest.Session):
            if self.errors:
                rep.outcome = "failed"
                rep.longrepr = "fak: malformed theorem documents:\n" + "\n".join(
                    f"  {report.relpath(e.path, self.rootpath)}:{e.line}: {e.message}"
                    for e in self.errors
                )
            return rep
        if not rep.passed:
            return rep
        lines: list[str] = []
        for node in rep.result:
            if isinstance(node, pytest.Item):
                for p in self._problems_for(node):
                    path, line, _ = node.location
                    lines.append(f"  {path}:{(line or 0) + 1}: {node.name}: {p}")
        if lines:
            rep.outcome = "failed"
            rep.longrepr = "fak: bad theorem bindings:\n" + "\n".join(lines)
        return rep

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.selection.choose(self.config, items)
        for item in items:
            ids, _ = _marker_ids(item)
            # a test binding theorems --fak-theorem did not choose witnesses only the chosen
            ids = [i for i in ids if self.selection.wants(i)]
            if ids:
                item.stash[_THEOREMS] = tuple(ids)
                for tid in ids:
                    item.user_properties.append(("fak_theorem", tid))

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.selection.record_deselected(items)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            where = report.nodeid or "(session)"
            if where not in self.selection.collect_errors:
                self.selection.collect_errors.append(where)

    # ------------------------------------------------------------------ running
    def _theorems_of(self, item: pytest.Item) -> list[Theorem]:
        return [t for tid in item.stash.get(_THEOREMS, ()) if (t := self.index.get(tid))]

    def _fingerprinted(self, theorems: list[Theorem]) -> bool:
        return self.generated is not None and any(t.anchors for t in theorems)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        """A witness's fixtures are part of what its run depends on: measure their set-up."""
        if not self._fingerprinted(self._theorems_of(item)):
            return (yield)
        # the harness's own code stays outside the measurement: the log opens first
        reads = self.reads[item.nodeid] = ReadLog()
        with reads:
            self.probe.begin(item.nodeid, setup=True)
            try:
                return (yield)
            finally:
                self.probe.end(item.nodeid, setup=True)

    def _fingerprint(self, item: pytest.Item) -> tuple[str, dict[str, str]]:
        """The fingerprint of the witness's run on the real code (set-up included), and
        its dependencies: the lines it executed, the files it read, its fixtures' code."""
        defs: list[tuple[str, str]] = []
        info = getattr(item, "_fixtureinfo", None)
        for fdefs in getattr(info, "name2fixturedefs", {}).values():
            for fd in fdefs:
                fn = getattr(fd, "func", None)
                code = getattr(fn, "__code__", None)
                if code is not None:
                    defs.append((code.co_filename, code.co_qualname.replace(".<locals>", "")))
        reads = self.reads.pop(item.nodeid, None)
        deps = self.blocks.deps(
            self.probe.all_lines(item.nodeid), reads.paths if reads else (), defs
        )
        return digest(deps), deps

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        theorems = self._theorems_of(item)
        if not theorems:
            return (yield)
        ev: dict[str, Any] = {}
        item.stash[_EVIDENCE] = ev
        used = kernelhook.KERNEL_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if used:
            # which kernel the witness got: the run names it, a verdict without a hook says so
            ev["kernel_fixtures"] = sorted(used)
            ev["kernel_factories"] = kernelhook.factories(item.config)
        anchored = any(t.anchors for t in theorems)
        counter = hyp.ExampleCounter()
        cap = self.max_examples
        budget = (
            hyp.capped_settings(getattr(item, "obj", None), cap)
            if cap
            else contextlib.nullcontext()
        )
        started = time.perf_counter()
        fingerprinted = self._fingerprinted(theorems)
        reads = self.reads.setdefault(item.nodeid, ReadLog()) if fingerprinted else None
        try:
            with counter, budget, reads if reads is not None else contextlib.nullcontext():
                if anchored:
                    self.probe.begin(item.nodeid)
                try:
                    res = yield
                finally:
                    if anchored:
                        self.probe.end(item.nodeid)
        except BaseException as exc:
            self.probe.finish()
            self.reads.pop(item.nodeid, None)
            ev["examples"] = counter.examples
            ev["anchors"] = self._anchors_of(item, theorems)
            failure = dict(counter.failure) or hyp.explicit_failure(exc)
            if failure:
                ev["hypothesis"] = failure
            raise
        ev["examples"] = counter.examples
        ev["anchors"] = self._anchors_of(item, theorems)
        baseline = time.perf_counter() - started
        fp: str | None = None
        if fingerprinted:
            fp, deps = self._fingerprint(item)
            ev["witness_deps"] = sorted(deps)
            if self.recorder is not None:
                self.recorder.record_deps(
                    {"nodeid": item.nodeid, "witness_fp": fp, "witness_deps": ev["witness_deps"]}
                )
        try:
            ev["mutants"], generated = self._run_mutants(item, theorems, baseline, fp)
        finally:
            self.probe.finish()  # the user's coverage (if any) resumes for the teardown
        if generated is not None:
            ev.update(generated)
        # JUnit: what this witness did (the theorems' verdicts are testcases of their own)
        killed = sorted(m for m, o in ev["mutants"].items() if o == verdicts.KILLED)
        item.user_properties += [
            ("fak_examples", ev["examples"] if ev["examples"] is not None else ""),
            ("fak_mutants_killed", " ".join(killed)),
        ]
        return res

    def _anchors_of(self, item: pytest.Item, theorems: list[Theorem]) -> dict[str, bool | None]:
        """Which of its theorems' anchors the witness's own run executed (empty: none
        measured); read right after that run, so it travels on the witness's report."""
        if item.nodeid not in self.probe.measured_nodeids:
            return {}
        wanted = {item.nodeid: [a for t in theorems for a in t.anchors]}
        return self.probe.results(wanted)[item.nodeid]

    def _in_flight(self, item: pytest.Item, mutant: str | None, kind: str) -> None:
        """Mark what the worker is about to run for ``item`` (see :mod:`pytest_fak.crash`)."""
        if self.recorder is None:
            return
        ev: dict[str, Any] = item.stash.get(_EVIDENCE, {})
        self.recorder.record(
            {
                "nodeid": item.nodeid,
                "theorems": [t for t in item.stash.get(_THEOREMS, ())],
                "mutant": mutant,
                "kind": kind,
                "examples": ev.get("examples"),
                "anchors": ev.get("anchors") or {},
                "anchor_mode": self.probe.mode,
                "witness_fp": None
                if self.generated is None
                else self.generated.fingerprints.get(item.nodeid),
            }
        )

    def _run_mutants(
        self, item: pytest.Item, theorems: list[Theorem], baseline: float, fp: str | None
    ) -> tuple[dict[str, str], dict[str, Any] | None]:
        out: dict[str, str] = {}
        decls = {m.id: m for t in theorems for m in t.mutants}
        phase = self.generated
        gen: dict[str, Any] | None = None
        todo: list[Any] = []
        if phase is not None and any(t.anchors for t in theorems):
            known, todo, hits = phase.plan(item, theorems, self.probe.lines(item.nodeid), fp)
            gen = {
                "generated": known,
                "generated_hits": hits,
                "generated_runs": 0,
                "generated_seconds": 0.0,
                "witness_fp": fp,
            }
        if not decls and not todo:
            return out, gen
        hyp_loaded = "hypothesis" in sys.modules
        if hyp_loaded:
            hyp.load_profile(hyp.MUTANT_PROFILE)
        budget = hyp.mutant_settings(getattr(item, "obj", None))
        budget.__enter__()  # the test's own Hypothesis settings, capped like the profile
        kills = (verdicts.KILLED, TIMEOUT, verdicts.MEMORY)
        memory = self.mutant_memory
        by_memory: list[str] = []
        try:
            for mid in sorted(decls):
                m = registry.get(mid)
                if m is None:
                    out[mid] = verdicts.MISSING
                    continue
                self._in_flight(item, mid, "declared")
                with self.quarantine.window():
                    outcome = self._under_mutant(item, m, memory=memory)
                # a declared mutant's kill has one word, whatever failed under it
                if outcome == verdicts.MEMORY:
                    by_memory.append(mid)
                    outcome = verdicts.KILLED
                out[mid] = outcome
            if gen is not None and phase is not None and todo:
                limit = max(float(self.config.getoption("fak_mutant_timeout")), 10 * baseline)
                started = time.perf_counter()
                for g in todo:
                    self._in_flight(item, g.id, "generated")
                    with self.quarantine.window():
                        outcome = self._under_mutant(item, g, limit, memory)
                    gen["generated"][g.id] = outcome
                gen["generated_runs"] = len(todo)
                gen["generated_seconds"] = round(time.perf_counter() - started, 3)
            fresh = {} if gen is None else {g.id: gen["generated"][g.id] for g in todo}
            oom = [k for k, v in fresh.items() if v == verdicts.MEMORY]
            if (by_memory or oom) and not self._fits_budget(item, memory):
                # the real code needs more than the budget: running out says nothing
                for k in by_memory:
                    out[k] = verdicts.INCONCLUSIVE
                for k in oom:
                    fresh[k] = verdicts.INCONCLUSIVE
                    if gen is not None:
                        gen["generated"][k] = verdicts.INCONCLUSIVE
            if verdicts.KILLED in out.values() or any(v in kills for v in fresh.values()):
                # Control: a kill only counts if the witness passes when re-run unbroken
                # (its fixtures built again without any mutant).
                self._in_flight(item, None, "control")
                try:
                    self._restore_fixtures(item)
                    item.runtest()
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException:
                    for k, v in out.items():
                        if v == verdicts.KILLED:
                            out[k] = verdicts.INCONCLUSIVE
                    assert gen is not None or not fresh
                    for k, v in fresh.items():
                        if v in kills and gen is not None:
                            gen["generated"][k] = verdicts.INCONCLUSIVE
            if phase is not None and gen is not None:
                # only a kill the control run confirmed spares the other witnesses the
                # mutant (a witness that fails its own re-run must not hide it from them)
                for k in fresh:
                    if gen["generated"][k] in kills:
                        phase.record_kill(theorems, k)
        finally:
            if self.recorder is not None:
                self.recorder.clear()
            budget.__exit__(None, None, None)
            if hyp_loaded:
                hyp.load_profile(hyp.PROFILE)
            # pytest tears the item down after this: leave it fixtures built unmutated
            with contextlib.suppress(Exception):
                self._restore_fixtures(item)
        return out, gen

    def _fits_budget(self, item: pytest.Item, memory: int | None) -> bool:
        """Whether the witness passes without any mutant inside the address-space budget
        (asked only after a mutant's re-run ran out of it)."""
        self._in_flight(item, None, "control")
        with self.quarantine.window():
            return self._under_mutant(item, _NoMutant(), memory=memory) == verdicts.SURVIVED

    @staticmethod
    def _restore_fixtures(item: pytest.Item) -> None:
        """Build the item's function-scoped fixtures without any mutant, if the mutant
        re-runs tore them down (no-op when they are in place)."""
        if rebuild.can_rebuild(item) and not rebuild.is_built(item):
            rebuild.setup(item)

    @staticmethod
    def _under_mutant(
        item: pytest.Item, m: Any, limit: float | None = None, memory: int | None = None
    ) -> str:
        """Run the witness once inside mutant ``m``; a mutant that cannot be applied or
        undone is BROKEN, never a kill (an exception there says nothing about the code).
        With a ``limit`` (generated mutants), a run past it is killed by ``timeout`` (the
        mutant hangs the code). With a ``memory`` budget (bytes), the run's address space
        is capped and a ``MemoryError`` kills it by ``memory``. A run Hypothesis refused
        (a health check, unsatisfiable inputs) is inconclusive, not a kill."""
        fresh = rebuild.can_rebuild(item)
        if fresh:
            # the fixtures built without the mutant go; the next ones are built inside it
            with contextlib.suppress(Exception):
                rebuild.teardown(item)
        # the re-run gets its own copy of the context: a context variable the mutant
        # leaves set (a scope never reset) must not leak into the control run or the
        # next mutant, where it would fail real code or pass broken code
        ctx = contextvars.copy_context()
        cm = m.applied()
        try:
            cm.__enter__()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:
            return verdicts.BROKEN
        outcome = verdicts.SURVIVED
        try:
            with (
                deadline(limit, lambda: interrupt_mutant(m))
                if limit is not None
                else contextlib.nullcontext(),
                crash.memory_limit(memory),
            ):
                if fresh:
                    # a fixture the mutant breaks is a failure the witness shows (the
                    # control run checks the fixtures build without it)
                    ctx.run(rebuild.setup, item)
                ctx.run(item.runtest)
        except MutantTimeout:
            outcome = TIMEOUT
        except pytest.skip.Exception:
            outcome = verdicts.INCONCLUSIVE
        except (KeyboardInterrupt, SystemExit):
            cm.__exit__(None, None, None)
            raise
        except BaseException as exc:
            # Hypothesis refusing the witness (a health check, no satisfiable input) under
            # the mutant is no counterexample: the property was never checked
            refused = _error_kind(pytest.ExceptionInfo.from_exception(exc))
            if refused:
                outcome = verdicts.INCONCLUSIVE
            elif crash.is_memory_error(exc):
                outcome = verdicts.MEMORY
            else:
                outcome = verdicts.KILLED
        if fresh:
            # torn down inside the mutant, as they were built; their errors are not kills
            with contextlib.suppress(Exception):
                ctx.run(rebuild.teardown, item)
        try:
            cm.__exit__(None, None, None)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:
            return verdicts.BROKEN
        if _is_generated(m):
            # a thread the re-run left running the mutant's code (a worker whose loop the
            # mutant no longer ends, though the witness already failed) would spin on
            # through every later re-run: stop it, whatever the outcome
            stop_mutant_threads(m)
        return outcome

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        rep = yield
        ids = item.stash.get(_THEOREMS, ())
        if ids:
            data: dict[str, Any] = {"theorems": list(ids)}
            if call.when == "call":
                evidence: dict[str, Any] = item.stash.get(_EVIDENCE, {})
                data.update(evidence)
                kind = _error_kind(call.excinfo)
                if kind:
                    data["error_kind"] = kind
                sources: dict[str, Any] = {}
                for t in self._theorems_of(item):
                    for decl in t.mutants:
                        m = registry.get(decl.id)
                        sources[decl.id] = inputs.mutant_source(m.factory) if m else None
                data["mutant_sources"] = sources
                data["anchor_mode"] = self.probe.mode
            rep.fak = data  # type: ignore[attr-defined]
        return rep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        data = getattr(report, "fak", None)
        if not isinstance(data, dict):
            return
        nodeid = report.nodeid
        ev = self.evidence.get(nodeid)
        if ev is None:
            ev = self.evidence[nodeid] = verdicts.WitnessEvidence(nodeid)
            self.bound[nodeid] = list(data.get("theorems", []))
        ev.duration_s += float(report.duration)
        for mid, where in (data.get("mutant_sources") or {}).items():
            self.mutant_sources[mid] = tuple(where) if where else None
        wasxfail = hasattr(report, "wasxfail")
        if report.when == "setup":
            if report.failed:
                ev.outcome = "error"
                ev.error_kind = "setup"
                ev.failure = {"message": _tail(report.longreprtext)}
            elif report.skipped:
                ev.outcome = "xfailed" if wasxfail else "skipped"
                ev.skip_reason = _skip_reason(report)
        elif report.when == "call":
            if wasxfail and report.skipped:
                ev.outcome = "xfailed"
            elif report.skipped:
                ev.outcome = "skipped"
                ev.skip_reason = _skip_reason(report)
            elif report.failed and data.get("error_kind"):
                ev.outcome = "error"  # Hypothesis refused to run it: no counterexample
                ev.error_kind = str(data["error_kind"])
            else:
                ev.outcome = report.outcome
            ev.examples = data.get("examples")
            ev.kernel_fixtures = [str(f) for f in data.get("kernel_fixtures") or ()]
            ev.kernel_factories = [str(f) for f in data.get("kernel_factories") or ()]
            ev.mutants = dict(data.get("mutants") or {})
            ev.generated = dict(data.get("generated") or {})
            ev.witness_fp = data.get("witness_fp")
            if ev.witness_fp:
                self._keep_deps(nodeid, ev.witness_fp, data.get("witness_deps"))
            ev.generated_hits = int(data.get("generated_hits") or 0)
            ev.generated_runs = int(data.get("generated_runs") or 0)
            ev.generated_seconds = float(data.get("generated_seconds") or 0.0)
            ev.anchors = dict(data.get("anchors") or {})
            if data.get("anchor_mode"):
                self.modes.add(str(data["anchor_mode"]))
            if report.failed:
                failure = {"message": _tail(report.longreprtext)}
                failure.update(data.get("hypothesis") or {})
                ev.failure = failure
        elif report.when == "teardown" and report.failed and ev.outcome == "passed":
            ev.outcome = "error"
            ev.error_kind = "teardown"
            ev.failure = {"message": _tail(report.longreprtext)}

    def _keep_deps(self, nodeid: str, fp: str, keys: object) -> None:
        """Keep the dependencies a worker measured for ``nodeid``'s run, re-hashed here: a
        file changed during the run gives another digest, and its results are not kept."""
        if not isinstance(keys, list):
            return
        deps = {str(k): h for k in keys if (h := self.blocks.current(str(k))) is not None}
        if len(deps) == len(keys) and digest(deps) == fp:
            self.deps[nodeid] = deps

    # ------------------------------------------------------------------ xdist
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.session_items = list(session.items)
        self.selection.record_collected(self.session_items)
        if self.generated is not None:
            self.generated.bind_items(self.session_items, self._theorems_of)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.selection.merge_worker(getattr(node, "workeroutput", {}) or {})

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Give each worker a "mutant in flight" marker file of its own."""
        if self.flight_dir is None:
            self.flight_dir = Path(tempfile.mkdtemp(prefix="fak-flight-"))
        node.workerinput["fak_flight"] = str(self.flight_dir / f"{node.gateway.id}.json")

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        """A worker died running ``crashitem``: keep what its "mutant in flight" marker
        says the witness did (:func:`pytest_fak.crash.record_crash` has the rule)."""
        node = getattr(report, "node", None)
        worker = str(getattr(getattr(node, "gateway", None), "id", "?"))
        path = (getattr(node, "workerinput", None) or {}).get("fak_flight")
        flight = crash.read_flight(path) if path else None
        if flight is not None and flight.get("nodeid") != crashitem:
            flight = None
        ids = list(flight.get("theorems") or []) if flight else self.bound.get(crashitem, [])
        if not ids:
            return  # not a witness
        ev = self.evidence.get(crashitem)
        if ev is None:
            ev = self.evidence[crashitem] = verdicts.WitnessEvidence(crashitem)
        self.bound.setdefault(crashitem, ids)
        crash.record_crash(ev, worker, flight)
        saved = crash.read_deps(path) if path and flight is not None else None
        if saved is not None and saved.get("nodeid") == crashitem and ev.witness_fp:
            self._keep_deps(crashitem, ev.witness_fp, saved.get("witness_deps"))
        if flight is not None and flight.get("anchor_mode"):
            self.modes.add(str(flight["anchor_mode"]))
        self.crashes.append({"nodeid": crashitem, **(ev.crash or {})})

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.probe.mode:
            self.modes.add(self.probe.mode)
        if self.is_worker:
            wo = self.config.workeroutput  # type: ignore[attr-defined]
            wo["fak_deselected"] = self.selection.deselected
            wo["fak_collect_errors"] = self.selection.collect_errors
            wo["fak_collected"] = self.selection.collected
            return
        if self.collect_only:
            self.last_line = "fak: collect only: no verdicts, nothing written"
            problems = {} if self.generated is None else self.generated.problems
            bad = sorted(t for t, ps in problems.items() if ps)
            if bad:
                # what would make these theorems ERROR in a run: stale or malformed waivers
                self.last_line = (
                    f"fak: FAILED: collect only: waivers of {', '.join(bad)} name no current "
                    "mutant or are malformed (a run reports them ERROR with the ids to copy)"
                )
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        if self.errors:
            self.last_line = "fak: FAILED: no verdicts: the theorem documents have errors"
            return
        empty = ci.nothing_to_prove(
            len(self.index),
            bool(self.config.getoption("fak_no_theorems_ok"))
            or bool(self.config.getini("fak_no_theorems_ok")),
            [report.relpath(d, self.rootpath) for d in self.dirs],
        )
        if empty is not None:
            self.last_line = empty
            session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
            return
        if session.exitstatus not in (0, 1, 5):
            why = "collection failed" if self.selection.collect_errors else "the run stopped"
            self.last_line = f"fak: FAILED: no verdicts ({why}); the report is unchanged"
            return
        stop = session.shouldfail or session.shouldstop
        self.selection.stopped_early(self.evidence, stop if isinstance(stop, str) else None)
        tvs = self.verdicts()
        self._write_cache()
        report_dir = self._report_dir()
        previous = report.load_previous(report_dir) if self.selection.partial else None
        prev_by_id = report.previous_records(previous)
        not_run: dict[str, tuple[str, bool]] = {}
        for tv in tvs:
            ran = [w.nodeid for w in tv.witnesses]
            skip = self.selection.why_not_run(
                tv.theorem, tv.verdict, ran, prev_by_id.get(tv.theorem.id)
            )
            if skip is not None:
                not_run[tv.theorem.id] = skip
        stale = self._stale_carried(prev_by_id, not_run)
        self.result = report.build(self._run_info(tvs), tvs, not_run, previous, stale)
        if self.fail_under is not None:
            self.result["run"]["fail_under"] = ci.fail_under(self.result, *self.fail_under)
        self.config.hook.pytest_fak_modify_report(config=self.config, report=self.result)
        try:
            self.written = report.write(self.result, report_dir)
        except ValueError as exc:
            self.last_line = f"fak: FAILED: no report written: {exc}"
            self.result = None
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        if self.committed is not None:
            self.transitions = ci.compare(self.result, self.committed)
        ci.junit_theorems(self.config, self.result, self.fail_on)
        annotate, step_file = ci.github_env()
        if step_file:
            with open(step_file, "a", encoding="utf-8") as fh:
                fh.write(ci.step_summary(self.result, self.fail_on, self.transitions))
        self.annotations = ci.github_annotations(self.result, self.fail_on) if annotate else []
        self.last_line = ci.final_line(self.result, self.fail_on)
        gate = self.result["run"].get("fail_under") or {}
        if (ci.failing(self.result, self.fail_on) or gate.get("below")) and session.exitstatus in (
            0,
            5,
        ):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _stale_carried(
        self, prev_by_id: dict[str, dict[str, Any]], not_run: dict[str, tuple[str, bool]]
    ) -> dict[str, str]:
        """Theorem id → why, for each verdict this partial run carries over whose inputs
        changed since it was decided (what ``fak proofs check`` calls STALE)."""
        ids = [t for t, (_, carry) in not_run.items() if carry and t in prev_by_id]
        if not ids:
            return {}
        from pytest_fak.cli import Fingerprints, check
        from pytest_fak.mutcache import CACHE_FILE

        fps = Fingerprints.load(self._cache_dir() / CACHE_FILE, self.rootpath, self._report_dir())
        found, _ = check({"theorems": [prev_by_id[t] for t in ids]}, self.dirs, self.rootpath, fps)
        return {tid: why for tid, why in found if tid in ids}

    def _run_info(self, tvs: list[verdicts.TheoremVerdict]) -> report.RunInfo:
        return report.RunInfo(
            rootpath=self.rootpath,
            report_dir=self._report_dir(),
            dirs=self.dirs,
            fail_on=self.fail_on,
            mutant_examples=self.mutant_examples,
            max_examples=self.max_examples,
            mutate=self.mutate,
            mutant_memory=self.mutant_memory,
            modes=self.modes,
            pack_nodeids=self.pack_nodeids(),
            kernel_factory=self.kernel_factory(),
            git=self.git,
            selection=self.selection.describe() if self.selection.partial else [],
            left_out=None if self.generated is None else self.generated.left_out,
            inputs={
                tv.theorem.id: inputs.record(
                    [w.nodeid for w in tv.witnesses],
                    {m.id: self.mutant_sources.get(m.id) for m in tv.theorem.mutants},
                    tv.theorem.depends_on,
                    self.rootpath,
                )
                for tv in tvs
            },
        )

    def _own_files(self) -> list[Path]:
        """What the run itself writes: the report's two files, the mutant cache."""
        d = self._report_dir()
        own = [d / "verdicts.json", d / "PROOFS.md"]
        if self.mutate != "off":
            own.append(self._cache_dir())
        return own

    def pack_nodeids(self) -> dict[str, str]:
        """nodeid → ``pytest_fak.pack.<module>::<test>`` for the bundled pack's witnesses."""
        out: dict[str, str] = {}
        for item in self.session_items:
            path = Path(str(item.path))
            if path.parent == PACK_DIR:
                rest = item.nodeid.split("::", 1)[1]
                out[item.nodeid] = f"pytest_fak.pack.{path.stem}::{rest}"
        return out

    def _report_dir(self) -> Path:
        d = Path(str(self.config.getoption("fak_report_dir")))
        return d if d.is_absolute() else self.rootpath / d

    def kernel_factory(self) -> str:
        """The factory of the kernels the witnesses got (as they recorded it, since a
        worker may load conftests the controller never sees), else this process's."""
        used = {tuple(ev.kernel_factories) for ev in self.evidence.values() if ev.kernel_fixtures}
        if not used:
            return kernelhook.describe(self.config)
        names = sorted(", else ".join(f) or kernelhook.DEFAULT_FACTORY for f in used)
        return "; ".join(names)

    def verdicts(self) -> list[verdicts.TheoremVerdict]:
        by_theorem: dict[str, list[verdicts.WitnessEvidence]] = {t.id: [] for t in self.index}
        for nodeid, ids in self.bound.items():
            for tid in ids:
                if tid in by_theorem:
                    by_theorem[tid].append(self.evidence[nodeid])
        # with the generated phase, each theorem's waivers are settled across the run
        tvs = verdicts.decide_all(self.index, by_theorem, self.generated)
        failed = self.selection.collect_errors
        for tv in tvs:
            fixtures = {f for w in tv.witnesses for f in w.kernel_fixtures}
            if (
                fixtures
                and tv.verdict not in (verdicts.PROVEN, verdicts.SCOPED_OUT)
                and not any(w.kernel_factories for w in tv.witnesses)
            ):
                tv.reasons.insert(0, kernelhook.no_factory_note(fixtures))
            if failed and not tv.witnesses and tv.verdict == verdicts.OPEN:
                # not an orphan we can name: its witnesses may be in what failed to collect
                shown = ", ".join(failed[:3]) + (" …" if len(failed) > 3 else "")
                tv.verdict = verdicts.ERROR
                tv.reasons = [
                    f"no collected test binds it, and collection failed in {shown}: "
                    "its witnesses may be there"
                ]
        return tvs

    def _write_cache(self) -> None:
        phase = self.generated
        if phase is None:
            return
        ran: dict[str, tuple[str, dict[str, str]]] = {}
        results: dict[str, dict[str, str]] = {}
        for nodeid, ev in self.evidence.items():
            deps = self.deps.get(nodeid)
            if ev.outcome != "passed" or not ev.witness_fp or deps is None:
                continue
            ran[nodeid] = (ev.witness_fp, deps)
            results[nodeid] = {
                phase.key(m): outcome
                for mid, outcome in ev.generated.items()
                if (m := phase.by_id.get(mid)) is not None
            }
        keys: dict[str, tuple[str, set[str]]] = {}
        for tid, ms in phase.of_theorem.items():
            for m in ms:
                keys.setdefault(phase.key(m), (m.id, set()))[1].add(tid)
        bound = self.bound
        self.cache_written = phase.cache.write(
            ran, results, lambda n: set(bound[n]) if n in bound else None, keys
        )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        tr = terminalreporter
        tr.write_sep("-", "fak proofs")
        if self.generated is not None and self.generated.cache.not_read:
            tr.write_line(f"fak: mutant cache not used: {self.generated.cache.not_read}")
        if self.result is None:
            tr.write_line(self.last_line or "fak: no verdicts: the run did not complete")
            return
        for t in self.result["theorems"]:
            shown = t["ran"] or t["verdict"] == verdicts.STALE
            if shown and t["verdict"] not in (verdicts.PROVEN, verdicts.SCOPED_OUT):
                why = "; ".join(t["reasons"][:2])
                tr.write_line(f"{t['verdict']:<10} {t['id']} {t['title']}: {why}")
        self._write_survivors(tr)
        run = self.result["run"]
        if run["partial"]:
            tr.write_line(
                f"fak: partial run ({'; '.join(run['selection'])}): {run['not_run']} theorems "
                f"not run, {run['carried_over']} keep their last verdict (carried over)"
            )
        tr.write_line(f"fak: kernel factory: {run['kernel_factory']}")
        tr.write_line(report.summary_line(run["summary"], run["not_run"]))
        out = run.get("not_mutated")
        if out:
            tr.write_line(
                f"fak: {out['anchors']} anchors in installed code were not mutated (modules: "
                f"{', '.join(out['modules'])}); {out['how']}"
            )
        for c in self.crashes:
            under = "outside any mutant (ERROR)"
            if c["mutant"]:
                under = f"under mutant {c['mutant']} (counted as killed)"
            tr.write_line(f"fak: worker {c['worker']} crashed in {c['nodeid']} {under}")
        for p in self.written:
            tr.write_line(f"fak: wrote {report.relpath(p, self.rootpath)}")
        if self.committed is not None:
            tr.write_line(
                f"fak: against {self.config.getoption('fak_compare')}: "
                + (f"{len(self.transitions)} changes" if self.transitions else "no change")
            )
            for line in self.transitions:
                tr.write_line(f"  {line}")
        for line in self.annotations:
            tr.write_line(line)

    def _write_survivors(self, tr: Any) -> None:
        """Every surviving generated mutant of the theorems that ran, at its own line (a
        path the terminal opens), up to :data:`_SHOWN_SURVIVORS`; then where the rest are."""
        assert self.result is not None
        rows: dict[str, tuple[str, str, list[str]]] = {}
        for t in self.result["theorems"]:
            g = t.get("generated")
            if not t["ran"] or not g:
                continue
            for s in g["survivors"]:
                path, _, line = str(s["where"]).rpartition(":")
                p = Path(path) if Path(path).is_absolute() else self.rootpath / path
                where = click_path(str(p), int(line) if line.isdigit() else 1, self._cwd())
                rows.setdefault(s["id"], (where, s["operator"], []))[2].append(t["id"])
        if not rows:
            return
        tr.write_line(f"fak: {len(rows)} surviving generated mutants (neither killed nor waived):")
        for mid, (where, op, tids) in list(rows.items())[:_SHOWN_SURVIVORS]:
            tr.write_line(f"  {where}: {mid} ({op}; {', '.join(tids)})")
        report_rel = report.project_path(self._report_dir() / "verdicts.json", self._cwd())
        rest = len(rows) - _SHOWN_SURVIVORS
        head = f"fak: {rest} more survivors are not shown here; " if rest > 0 else "fak: "
        tr.write_line(
            f"{head}all of them, each with its diff and the waiver to paste: fak mutants list "
            f"--survivors, fak mutants show ID (from {report_rel})"
        )

    def _cwd(self) -> Path:
        return Path(self.config.invocation_params.dir)


#: how many surviving mutants the terminal summary lists before pointing at the full list
_SHOWN_SURVIVORS = 50


def _is_generated(m: object) -> bool:
    """Whether ``m`` is a generated mutant (none exists unless their module, and libcst
    with it, was imported)."""
    generated = sys.modules.get("pytest_fak.generated")
    return generated is not None and isinstance(m, generated.GeneratedMutant)


def _mutant_weight() -> Callable[[Theorem], int]:
    """A theorem's share of a full run, for ``--fak-shard``: its generated mutants."""
    counts: dict[str, int] = {}

    def weight(t: Theorem) -> int:
        extras.require_mutate("--fak-shard")
        from pytest_fak.generated import generate

        ids: set[str] = set()
        for a in t.anchors:
            if a.symbol not in counts:
                try:
                    counts[a.symbol] = len(generate(a.symbol).mutants)
                except SymbolError:
                    counts[a.symbol] = 0
            ids.add(a.symbol)
        return sum(counts[s] for s in ids)

    return weight


def _installed_code() -> list[str]:
    """Coverage patterns of :func:`_installed_dirs`'s files."""
    return [f"{d}{os.sep}*" for d in installed_dirs()]


class _NoMutant:
    """Applies nothing: :meth:`ProofSession._under_mutant` of the real code."""

    def applied(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


class _LastLine:
    """Writes proof mode's verdict line after pytest's own ``N passed in …`` line, so the
    last line of the run says whether the proofs failed and why."""

    def __init__(self, ps: ProofSession) -> None:
        self.ps = ps

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            tr = self.ps.config.pluginmanager.get_plugin("terminalreporter")
            line = self.ps.last_line
            if tr is not None and line:
                failed = line.startswith("fak: FAILED")
                tr.write_line(line, red=failed, green=not failed, bold=True)


def _skip_reason(rep: pytest.TestReport) -> str | None:
    lr = rep.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        return str(lr[2])
    return None


def _tail(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]
