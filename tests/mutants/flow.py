"""Mutants of plan preflight and freezing (theorems/flow.md): plausible wrong implementations.

Each one breaks a real code path of ``fak_core.flow`` (or the gateway's manifest start-up)
reversibly; the witnesses bound to the theorem must fail under it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from pathlib import Path
from typing import Any
from unittest import mock

import rfc8785

from fak_core.flow.compiler import compile_flow
from fak_core.flow.manifest import Manifest, kernel_policy_for
from fak_core.flow.preflight import PreflightOutcome
from fak_core.flow.resolver import User
from fak_core.flow.runner import revalidate
from fak_core.flow.secretscan import SecretScanner
from fak_core.flow.task import launch_task
from pytest_fak.mutants import mutant
from tests.mutants.sourcepatch import edited

__all__: list[str] = []

_canonical = importlib.import_module("fak_core.flow.canonical")
_compiler = importlib.import_module("fak_core.flow.compiler")
_runner = importlib.import_module("fak_core.flow.runner")
_task = importlib.import_module("fak_core.flow.task")
_projection = importlib.import_module("fak_core.flow.projection")
_flow_pkg = importlib.import_module("fak_core.flow")
_preflight = importlib.import_module("fak_core.flow.preflight")


class _Canonicaliser:
    """Stands in for the ``rfc8785`` module inside ``fak_core.flow.canonical``."""

    CanonicalizationError = rfc8785.CanonicalizationError

    def __init__(self, dumps: Any) -> None:
        self.dumps = dumps


def _drop_last_member(doc: Any) -> Any:
    if isinstance(doc, dict):
        keys = sorted(doc, key=lambda k: str(k).encode("utf-16-be"))[:-1]
        return {k: _drop_last_member(doc[k]) for k in keys}
    if isinstance(doc, list):
        return [_drop_last_member(v) for v in doc]
    return doc


# ---------------------------------------------------------------------------------- F1.1
@mutant("F1.1/digest-ignores-field")
def digest_ignores_field() -> Any:
    """The canonical form skips the last member of every object (an off-by-one member loop)."""
    fake = _Canonicaliser(lambda doc: rfc8785.dumps(_drop_last_member(doc)))
    return mock.patch.object(_canonical, "rfc8785", fake)


@mutant("F1.1/unsorted-keys")
def unsorted_keys() -> Any:
    """Object members keep their insertion order instead of RFC 8785's UTF-16 order."""

    def dumps(doc: Any) -> bytes:
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8")

    return mock.patch.object(_canonical, "rfc8785", _Canonicaliser(dumps))


@mutant("F1.1/python-number-spelling")
def python_number_spelling() -> Any:
    """Numbers are spelled the Python way (``1.0``, ``1e+23``) instead of ECMAScript's."""

    def dumps(doc: Any) -> bytes:
        text = json.dumps(
            doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return text.encode("utf-8")

    return mock.patch.object(_canonical, "rfc8785", _Canonicaliser(dumps))


# ---------------------------------------------------------------------------------- F1.2
@mutant("F1.2/runner-skips-digest")
def runner_skips_digest() -> Any:
    """The runner trusts the recorded digest instead of recomputing it over the body."""

    def computed_digest(self: Manifest) -> str:
        return self.digest

    return mock.patch.object(Manifest, "computed_digest", computed_digest)


@mutant("F1.2/ignores-expected-digest")
def ignores_expected_digest() -> Any:
    """The runner never compares the manifest with the digest the execution spec names."""
    return edited(
        revalidate,
        ("if expected_digest is not None and expected_digest != manifest.digest:", "if False:"),
    )


@mutant("F1.2/no-recompile")
def no_recompile() -> Any:
    """The runner checks the digest only and never re-derives the body with the compiler."""
    return mock.patch.object(_runner, "_content_findings", return_value=[])


@mutant("F1.2/floating-resolved")
def floating_resolved() -> Any:
    """A floating reference is resolved against the lock by name instead of being refused."""
    return edited(
        _runner._content_findings,
        ("if ref.floating:", "if False:"),
        (
            "entry = lock_entry_for(lock, ref)",
            "entry = next((e for e in lock if (e.get('kind'), e.get('name')) == "
            "(ref.kind, ref.name)), None)",
        ),
    )


@mutant("F1.2/risk-unchecked")
def risk_unchecked() -> Any:
    """A body whose risk is not an object skips the node-entry check (the bug: a resealed
    body with ``risk: "x"`` could carry any prompts, models and approvals)."""
    return edited(
        _runner._content_findings,
        (
            'return [*out, Finding("MALFORMED_MANIFEST", "manifest.risk", '
            '"expected a risk object")]',
            "pass",
        ),
        ("    if compiled.ok:\n", "    if compiled.ok and isinstance(risk, dict):\n"),
    )


@mutant("F1.2/declared-approval-overridden")
def declared_approval_overridden() -> Any:
    """A node's entry takes its approval from the risk alone, so a resealed body that lowers
    it in both the risk and the entry drops an approval the snapshot's node asks for."""
    from fak_core.flow.manifest import node_entries

    return edited(node_entries, (" or by_id[i].approval_required", ""))


@mutant("F1.2/requirements-unchecked")
def requirements_unchecked() -> Any:
    """The requirement entries the runner fetches are not compared with the snapshot's (the
    bug: a resealed body could point a requirement at another file)."""
    return edited(
        _runner._content_findings,
        (
            "[requirement_entry(q, r) for q, r in zip(flow.requirements, revisions, strict=False)]",
            "requirements",
        ),
        ("            else None,\n", "            else requirements,\n"),
    )


@mutant("F1.2/missing-part-accepted")
def missing_part_accepted() -> Any:
    """A missing part is compared as ``None``, which the unusable requirements expectation
    also is (the bug: a resealed body without requirements passed, and nothing was fetched)."""
    return edited(
        _runner._content_findings,
        ("        if key not in body or body[key] != want:", "        if body.get(key) != want:"),
    )


@mutant("F1.2/object-format-unchecked")
def object_format_unchecked() -> Any:
    """A runner given a ``Manifest`` object starts from it as it is, without the file checks
    (format, shapes, canonical form) a manifest given as JSON gets (the bug)."""
    return edited(
        _runner.Runner.start,
        ("if isinstance(raw, Manifest)\n", "if False\n"),
        (
            'else Manifest.from_json(raw, "mounted")',
            'else raw if isinstance(raw, Manifest) else Manifest.from_json(raw, "mounted")',
        ),
    )


# ---------------------------------------------------------------------------------- F1.3
@mutant("F1.3/uncanonical-flow-crashes")
def uncanonical_flow_crashes() -> Any:
    """The determine step digests the flow unguarded (the bug: a flow with no canonical form
    raised ``CanonicalError`` out of preflight, leaving no step results)."""
    return edited(
        _preflight._source_digest,
        (
            "    try:\n        return digest(flow_to_dict(flow))\n",
            "    return digest(flow_to_dict(flow))\n    try:\n        pass\n",
        ),
    )


@mutant("F1.3/resources-first")
def resources_first() -> Any:
    """The sandbox and task secret are created before preflight runs (released on failure)."""
    return edited(
        launch_task,
        (
            "    outcome = preflight(\n",
            "    early = [resources.create_sandbox(task_id, b''), "
            "resources.create_task_secret(task_id, ())]\n"
            "    outcome = preflight(\n",
        ),
        (
            'return TaskRecord(task_id, "preflight-failed", outcome)',
            "[resources.release(r) for r in early]\n"
            '        return TaskRecord(task_id, "preflight-failed", outcome)',
        ),
    )


@mutant("F1.3/no-release")
def no_release() -> Any:
    """A runner that refuses to start leaves the sandbox, services and secret behind."""
    return edited(launch_task, ("resources.release(r)", "pass"))


@mutant("F1.3/results-dropped")
def results_dropped() -> Any:
    """A failed preflight leaves no step results and no repair entry point behind."""
    real = _task.preflight

    def preflight(*args: Any, **kwargs: Any) -> PreflightOutcome:
        out: PreflightOutcome = real(*args, **kwargs)
        return out if out.ok else PreflightOutcome(())

    return mock.patch.object(_task, "preflight", preflight)


@mutant("F1.3/grants-ignored")
def grants_ignored() -> Any:
    """Re-authorisation falls back to allowing a capability the user no longer holds."""
    return mock.patch.object(User, "granted", return_value=True)


# ---------------------------------------------------------------------------------- F1.4
@mutant("F1.4/scanner-blind")
def scanner_blind() -> Any:
    """The scanner never flags a secret-shaped value."""
    return mock.patch.object(SecretScanner, "value_problem", return_value=None)


@mutant("F1.4/keys-unchecked")
def keys_unchecked() -> Any:
    """The scanner looks at values only, never at key names (``GITHUB_TOKEN: x`` passes)."""
    return mock.patch.object(SecretScanner, "key_problem", return_value=None)


@mutant("F1.4/private-values-ignored")
def private_values_ignored() -> Any:
    """The scanner forgets the private execution layer's exact values (system prompt, gateway)."""
    real = SecretScanner.__init__

    def init(self: SecretScanner, private: Any = ()) -> None:
        real(self, ())

    return mock.patch.object(SecretScanner, "__init__", init)


@mutant("F1.4/projection-unscanned")
def projection_unscanned() -> Any:
    """The UI projection is returned without being scanned."""
    return mock.patch.object(_projection, "scan", return_value=[])


# ---------------------------------------------------------------------------------- F1.5
@mutant("F1.5/no-cycle-check")
def no_cycle_check() -> Any:
    """The compiler never reports a dependency cycle."""
    return edited(compile_flow, ("if nid in reach[nid]:", "if False:"))


@mutant("F1.5/no-rework-check")
def no_rework_check() -> Any:
    """Any node of the flow is accepted as a rework target, upstream or not."""
    return edited(compile_flow, ("elif node.id not in reach.get(target, set()):", "elif False:"))


@mutant("F1.5/two-sources-allowed")
def two_sources_allowed() -> Any:
    """An input may have two sources (an off-by-one in the one-source rule)."""
    return edited(compile_flow, ("if len(inp.sources) > 1:", "if len(inp.sources) > 2:"))


@mutant("F1.5/file-order-plan")
def file_order_plan() -> Any:
    """Ready nodes are scheduled first-in first-out from file order, not by id."""
    stack = contextlib.ExitStack()
    stack.enter_context(
        edited(
            compile_flow,
            ("_topological(sorted(first_index), edges)", "_topological(list(first_index), edges)"),
        )
    )
    stack.enter_context(
        edited(
            _compiler._topological,
            ("heapq.heapify(ready)", "pass"),
            ("x = heapq.heappop(ready)", "x = ready.pop(0)"),
            ("heapq.heappush(ready, y)", "ready.append(y)"),
        )
    )
    return stack


# ---------------------------------------------------------------------------------- F1.6
@mutant("F1.6/lock-allows-prefixes")
def lock_allows_prefixes() -> Any:
    """The node policy keeps the default policy's allowed prefixes (``get_``, ``read_`` ...)."""
    return edited(
        kernel_policy_for, ('"allow_prefix": [],', '"allow_prefix": list(base.allow_prefix),')
    )


@mutant("F1.6/lock-adds-builtins")
def lock_adds_builtins() -> Any:
    """The node policy allows the default policy's tools as well as the locked ones."""
    return edited(
        kernel_policy_for, ('"allow": sorted(names),', '"allow": sorted(names | set(base.allow)),')
    )


@mutant("F1.6/serve-skips-verify")
def serve_skips_verify() -> Any:
    """``fak serve --manifest`` parses the manifest without re-validating it."""

    def load(path: str | Path, expected_digest: str | None = None) -> Manifest:
        return Manifest.from_json(Path(path).read_bytes(), str(path))

    return mock.patch.object(_flow_pkg, "load_verified_manifest", load)


# ---------------------------------------------------------------------------------- F1.7
_model = importlib.import_module("fak_core.flow.model")
_refs = importlib.import_module("fak_core.flow.refs")


@mutant("F1.7/loose-semver")
def loose_semver() -> Any:
    """The version grammar before the fix: any run of ``[0-9A-Za-z.-]`` after ``-`` or ``+``,
    so ``1.2.3-01`` or ``1.2.3-a..b`` is an exact version and ``\\d`` takes any digit (the bug)."""
    import re

    loose = re.compile(
        r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.\-]+)?(?:\+[0-9A-Za-z.\-]+)?"
    )
    return mock.patch.object(_refs, "_SEMVER", loose)


@mutant("F1.7/runtime-key-crash")
def runtime_key_crash() -> Any:
    """A node's runtime is checked as a table whose keys are its own keys, so a non-string
    key (YAML ``{1: x}``) makes the message join fail with a ``TypeError`` (the bug)."""
    return edited(
        _model._node,
        (
            "if not isinstance(runtime, dict):  # any string keys; json_value refuses the others\n"
            '        raise d.fail(_join(path, "runtime"), f"expected a table/object, got '
            '{_tname(runtime)}")',
            'd.table(runtime, _join(path, "runtime"), '
            "tuple(runtime) if isinstance(runtime, dict) else (), ())",
        ),
    )


@mutant("F1.7/json-duplicates-kept")
def json_duplicates_kept() -> Any:
    """JSON files are read without the duplicate-key hook: the last value silently wins."""
    return edited(
        _model.load_document,
        ("json.loads(text, object_pairs_hook=_no_duplicates)", "json.loads(text)"),
    )


@mutant("F1.7/yaml-duplicates-kept")
def yaml_duplicates_kept() -> Any:
    """YAML files are read with the plain safe loader: the last value silently wins."""
    return edited(
        _model.load_document, ("yaml.load(text, Loader=_StrictLoader)", "yaml.safe_load(text)")
    )


# ---------------------------------------------------------------------------------- F1.8
_resolver = importlib.import_module("fak_core.flow.resolver")


@mutant("F1.8/duplicate-capability-kept")
def duplicate_capability_kept() -> Any:
    """A capability listed twice replaces the first silently (the bug)."""
    return edited(
        _resolver.FileWorkspace._capability,
        ("if (kind, name) in self._caps:", "if False:"),
    )


@mutant("F1.8/loose-workspace-digest")
def loose_workspace_digest() -> Any:
    """A version's digest is checked for its prefix and length only (the bug)."""
    return edited(
        _resolver.FileWorkspace._capability,
        (
            "not _DIGEST.fullmatch(dig)",
            'not dig.startswith("sha256:") or len(dig) != 71',
        ),
    )
