"""Mutants for the kernel theorems: preflight (A7), fold and dispatch (D1, D8), vocabulary
(A8), taint (C4) and policy (D2). Each is a plausible wrong implementation."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Sequence
from typing import Any
from unittest import mock

from fak_core.adjudicators import Adjudicator, WitnessOutcome
from fak_core.calls import Result, ToolCall
from fak_core.floor import CapabilityFloor
from fak_core.ledger import MemoryLedger
from fak_core.preflight import Ladder, NegativeRow, NegativesLedger
from fak_core.provenance import SourceRegistry
from fak_core.reasons import Disposition, Reason
from fak_core.schemas import CompiledSchema
from fak_core.sinks import SinkGate
from fak_core.taint import Taint
from fak_core.verdicts import KindRegistry, Verdict, VerdictKind
from fak_core.view import CallView
from pytest_fak import mutant
from pytest_fak.pack import mutants as pack_mutants
from tests.mutants.sourcepatch import edited

_fold = importlib.import_module("fak_core.fold")
_kernel = importlib.import_module("fak_core.kernel")
_jsonargs = importlib.import_module("fak_core.jsonargs")
_reasons = importlib.import_module("fak_core.reasons")
_policy = importlib.import_module("fak_core.policy")
_sinks = importlib.import_module("fak_core.sinks")

_real_ladder = Ladder.adjudicate
_real_fold = _fold.fold


# ---------------------------------------------------------------- A7 preflight
@mutant("A7.1/swap-rungs")
def swap_rungs() -> Any:
    """Evaluate the two cheapest rungs in the wrong order (schema before parse)."""

    def adjudicate(self: Ladder, view: CallView) -> Verdict:
        rungs = self._rungs
        if len(rungs) >= 2:
            rungs[0], rungs[1] = rungs[1], rungs[0]
        try:
            return _real_ladder(self, view)
        finally:
            if len(rungs) >= 2:
                rungs[0], rungs[1] = rungs[1], rungs[0]

    return mock.patch.object(Ladder, "adjudicate", adjudicate)


@mutant("A7.2/keeps-going")
def keeps_going() -> Any:
    """Evaluate every rung even after a catch, then report the first catch (the pack's)."""
    return pack_mutants.keeps_going()


@mutant("A7.3/ladder-allows")
def ladder_allows() -> Any:
    """A call that passes every rung is ALLOWED by the ladder instead of deferred."""

    def adjudicate(self: Ladder, view: CallView) -> Verdict:
        v = _real_ladder(self, view)
        return Verdict.allow("preflight") if v.kind == VerdictKind.DEFER else v

    return mock.patch.object(Ladder, "adjudicate", adjudicate)


@mutant("A7.3/unbounded-negatives")
def unbounded_negatives() -> Any:
    """The negatives ledger forgets its bound."""

    def append(self: NegativesLedger, row: NegativeRow) -> None:
        from collections import deque

        if self._rows.maxlen is not None:
            self._rows = deque(self._rows)
        self._rows.append(row)

    return mock.patch.object(NegativesLedger, "append", append)


@mutant("A7.4/duplicates-pass")
def duplicates_pass() -> Any:
    """Rung 0 stops refusing duplicate keys (last one wins, as orjson reads them)."""
    return mock.patch.object(_jsonargs, "_has_duplicates", return_value=False)


@mutant("A7.4/required-ignored")
def required_ignored() -> Any:
    """The compiled fast validator drops the top-level ``required`` keyword."""
    real_init = CompiledSchema.__init__

    def init(self: CompiledSchema, schema: Any, fast: Any) -> None:
        import jsonschema_rs

        if isinstance(schema, dict) and "required" in schema:
            lax = {k: v for k, v in schema.items() if k != "required"}
            fast = jsonschema_rs.Draft202012Validator(lax, validate_formats=False)
        real_init(self, schema, fast)

    return mock.patch.object(CompiledSchema, "__init__", init)


# ---------------------------------------------------------------- D1 fold, D1.2, D8
def _patch_fold(fn: Any) -> Any:
    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(_fold, "fold", fn))
    stack.enter_context(mock.patch.object(_kernel, "fold", fn))
    for mod in ("tests.kernel.test_fold",):
        module = importlib.import_module(mod)
        stack.enter_context(mock.patch.object(module, "fold", fn))
    return stack


@mutant("D1/first-match")
def first_match() -> Any:
    """The first conclusive verdict wins instead of the most restrictive."""

    def fold(chain: Sequence[Adjudicator], view: CallView, kinds: KindRegistry) -> Verdict:
        if not chain:
            return Verdict.deny(Reason.DEFAULT_DENY, "empty-policy")
        for adj in chain:
            try:
                v = adj.adjudicate(view)
            except Exception:
                return Verdict.deny(Reason.DEFAULT_DENY, "error")
            if v.kind not in (VerdictKind.DEFER, VerdictKind.INDETERMINATE):
                return v
        return Verdict.deny(Reason.DEFAULT_DENY, "all-defer")

    return _patch_fold(fold)


@mutant("D1/default-allow")
def default_allow() -> Any:
    """An empty or all-DEFER chain allows (fail open)."""

    def fold(chain: Sequence[Adjudicator], view: CallView, kinds: KindRegistry) -> Verdict:
        v = _real_fold(chain, view, kinds)
        if v.reason == Reason.DEFAULT_DENY and v.by in ("empty-policy", "all-defer"):
            return Verdict.allow("default")
        return v

    return _patch_fold(fold)


_real_authorize = _kernel.Kernel.authorize


@mutant("D1.2/dispatch-held")
def dispatch_held() -> Any:
    """Any verdict that is not DENY dispatches (QUARANTINE, DEFER, unknown kinds run)."""

    def authorize(self: Any, call: ToolCall) -> tuple[ToolCall, Verdict, bool]:
        call2, verdict, runnable = _real_authorize(self, call)
        return call2, verdict, runnable or verdict.kind != VerdictKind.DENY

    return mock.patch.object(_kernel.Kernel, "authorize", authorize)


@mutant("D1.2/transform-ignored")
def transform_ignored() -> Any:
    """A TRANSFORM runs the tool with the original, unrepaired arguments."""

    def authorize(self: Any, call: ToolCall) -> tuple[ToolCall, Verdict, bool]:
        _, verdict, runnable = _real_authorize(self, call)
        if call.seq == 0:
            call = call.with_seq(1)
        return call, verdict, runnable

    return mock.patch.object(_kernel.Kernel, "authorize", authorize)


@mutant("D1.2/settle-before-witness")
def settle_before_witness() -> Any:
    """The call's view is settled on the raw verdict, before its witness is asked (the
    bug): a call its witness refuses keeps what the rate limit reserved for it."""
    return edited(
        _kernel.Kernel.authorize,
        (
            "    verdict = self._decide(call, view)\n",
            "    verdict = self._decide(call, view)\n"
            "    _w = view.witnessed.after if view.witnessed is not None else None\n"
            "    view.settle(verdict.kind in (_ALLOW, _TRANSFORM) or (verdict.kind == _WITNESS"
            " and (_w is None or _w.kind == _TRANSFORM)))\n",
        ),
    )


@mutant("D1.2/own-deadline-is-timeout")
def own_deadline_is_timeout() -> Any:
    """A ``DeadlineExceeded`` the tool raises itself is read as the kernel's timeout (the
    bug): counted in ``tool_timeouts`` under ``tool_timeout``, and without one the timeout
    message cannot even be written (``None:g``) and the exception escapes."""
    return edited(
        _kernel.Kernel._run,
        (
            "if isinstance(exc, DeadlineExceeded) and timeout is not None and exc not in own:",
            "if isinstance(exc, DeadlineExceeded):",
        ),
    )


@mutant("D8/abstain-confirms")
def abstain_confirms() -> Any:
    """A witness resolver that abstains (or none at all) counts as a confirmation."""

    def resolve_witness(
        self: Any, call: ToolCall, verdict: Verdict, witnessed: Any = None
    ) -> Verdict:
        for _, resolver in tuple(self._witnesses):
            if resolver.resolve(call, verdict.claim) == WitnessOutcome.REFUTED:
                return Verdict.deny(Reason.TRUST_VIOLATION, "witness")
        return Verdict.allow("witness")

    return mock.patch.object(_kernel.Kernel, "resolve_witness", resolve_witness)


_real_resolve_witness = _kernel.Kernel.resolve_witness


@mutant("D8.1/confirm-replaces-fold")
def confirm_replaces_fold() -> Any:
    """A confirmation answers ALLOW whatever the other opinions were (the original bug:
    a screen's QUARANTINE or a TRANSFORM beside a REQUIRE_WITNESS is dropped)."""

    def resolve_witness(
        self: Any, call: ToolCall, verdict: Verdict, witnessed: Any = None
    ) -> Verdict:
        dropped = None if witnessed is None else witnessed._replace(after=None)
        return _real_resolve_witness(self, call, verdict, dropped)

    return mock.patch.object(_kernel.Kernel, "resolve_witness", resolve_witness)


@mutant("D8.1/first-claim-only")
def first_claim_only() -> Any:
    """Only the winning REQUIRE_WITNESS opinion's claim is asked; later claims pass unasked."""

    def resolve_witness(
        self: Any, call: ToolCall, verdict: Verdict, witnessed: Any = None
    ) -> Verdict:
        if witnessed is not None:
            witnessed = witnessed._replace(opinions=witnessed.opinions[:1])
        return _real_resolve_witness(self, call, verdict, witnessed)

    return mock.patch.object(_kernel.Kernel, "resolve_witness", resolve_witness)


# ---------------------------------------------------------------- A8 vocabulary
@mutant("A8/disposition-drift")
def disposition_drift() -> Any:
    """TRUST_VIOLATION quietly becomes TERMINAL (a shipped value changed)."""
    return mock.patch.dict(_reasons._DISPOSITIONS, {Reason.TRUST_VIOLATION: Disposition.TERMINAL})


@mutant("A8/rank-drift")
def rank_drift() -> Any:
    """QUARANTINE ranks below TRANSFORM."""
    ranks = importlib.import_module("fak_core.verdicts")._CORE_RANKS
    return mock.patch.dict(ranks, {VerdictKind.QUARANTINE: 15})


# ---------------------------------------------------------------- C4 taint
@mutant("C4.1/shared-ledger")
def shared_ledger() -> Any:
    """One mark for every trace: the ledger ignores the trace id."""
    real_level, real_raise, real_reset = (
        MemoryLedger.level,
        MemoryLedger.raise_to,
        MemoryLedger.reset,
    )
    stack = contextlib.ExitStack()
    stack.enter_context(
        mock.patch.object(MemoryLedger, "level", lambda self, t: real_level(self, "*"))
    )
    stack.enter_context(
        mock.patch.object(
            MemoryLedger, "raise_to", lambda self, t, taint: real_raise(self, "*", taint)
        )
    )
    stack.enter_context(
        mock.patch.object(MemoryLedger, "reset", lambda self, t: real_reset(self, "*"))
    )
    return stack


@mutant("C4.1/raise-overwrites")
def raise_overwrites() -> Any:
    """``raise_to`` overwrites the mark, so a later TRUSTED result lowers it."""

    def raise_to(self: MemoryLedger, trace_id: str, taint: Taint) -> Taint:
        with self._lock:
            self._marks[trace_id] = Taint(taint)
            return Taint(taint)

    return mock.patch.object(MemoryLedger, "raise_to", raise_to)


_real_result_taint = SourceRegistry.result_taint


@mutant("C4.2/metadata-trusted")
def metadata_trusted() -> Any:
    """The call's metadata can vouch for its result (a self-tag is honoured)."""

    def result_taint(
        self: SourceRegistry, call: ToolCall, result: Result, quarantined: bool
    ) -> Taint:
        if not quarantined and call.meta.get("provenance") == "trusted_local":
            return Taint.TRUSTED
        return _real_result_taint(self, call, result, quarantined)

    return mock.patch.object(SourceRegistry, "result_taint", result_taint)


@mutant("C4.2/caller-results-trusted")
def caller_results_trusted() -> Any:
    """A result is trusted whenever its tool's name is registered trusted_local, whoever ran it."""

    def result_taint(
        self: SourceRegistry, call: ToolCall, result: Result, quarantined: bool
    ) -> Taint:
        return _real_result_taint(self, call, result._replace(taint=Taint.TRUSTED), quarantined)

    return mock.patch.object(SourceRegistry, "result_taint", result_taint)


@mutant("C4.3/gate-off")
def gate_off() -> Any:
    """The sink gate never denies."""
    return mock.patch.object(SinkGate, "adjudicate", return_value=Verdict.defer("ifc-sink"))


@mutant("C4.3/names-only")
def names_only() -> Any:
    """Sink classification looks only at the tool name, not at destinations in arguments."""
    return mock.patch.object(_sinks, "has_external_destination", return_value=False)


# ---------------------------------------------------------------- D2 policy
_real_to_dict = _policy.policy_to_dict


@mutant("D2.1/dump-drops-arg-rules")
def dump_drops_arg_rules() -> Any:
    """The dumper forgets the per-argument rules."""

    def to_dict(policy: Any) -> dict[str, Any]:
        doc = _real_to_dict(policy)
        doc["arg_rules"] = []
        return doc

    return mock.patch.object(_policy, "policy_to_dict", to_dict)


_real_floor = CapabilityFloor.adjudicate


@mutant("D2.2/deny-map-skipped")
def deny_map_skipped() -> Any:
    """The floor checks its allow list before its deny map."""

    def adjudicate(self: CapabilityFloor, view: CallView) -> Verdict:
        if view.call.tool in self._allow:
            return Verdict.allow("floor")
        return _real_floor(self, view)

    return mock.patch.object(CapabilityFloor, "adjudicate", adjudicate)


@mutant("D2.2/prefix-substring")
def prefix_substring() -> Any:
    """An allow prefix matches anywhere in the name, not only at its start."""

    def adjudicate(self: CapabilityFloor, view: CallView) -> Verdict:
        v = _real_floor(self, view)
        tool = view.call.tool
        if v.reason == Reason.DEFAULT_DENY and any(p in tool for p in self._prefixes):
            return Verdict.allow("floor")
        return v

    return mock.patch.object(CapabilityFloor, "adjudicate", adjudicate)


@mutant("D2.3/unknown-keys-ignored")
def unknown_keys_ignored() -> Any:
    """The loader drops keys it does not know instead of refusing them."""
    real_parse = _policy.parse_policy

    def parse(doc: Any, reasons: Any = None) -> Any:
        if isinstance(doc, dict):
            doc = {k: v for k, v in doc.items() if k in _policy._KEYS}
        return real_parse(doc, reasons)

    return mock.patch.object(_policy, "parse_policy", parse)


@mutant("D2.3/unknown-reasons-pass")
def unknown_reasons_pass() -> Any:
    """An unknown reason name in the deny map is accepted as POLICY_BLOCK."""

    def reason(reasons: Any, key: str, name: str) -> str:
        return name

    return mock.patch.object(_policy, "_reason", reason)


@mutant("D2.3/surrogate-pattern-crashes")
def surrogate_pattern_crashes() -> Any:
    """A policy pattern holding a lone surrogate escapes the loader as UnicodeEncodeError
    instead of a PolicyError naming its key (the bug)."""
    from fak_core.patterns import compile_policy_pattern

    return edited(
        compile_policy_pattern,
        ("    except UnicodeEncodeError:  # RE2 reads UTF-8", "    except ():  # RE2 reads UTF-8"),
    )


@mutant("D2.3/origin-prefix-loose")
def origin_prefix_loose() -> Any:
    """An error is taken as already prefixed when it merely starts with the file's name, so
    a file named like the start of a message (``pol``, ``policy``) is not named (the bug)."""
    return edited(_policy.load_policy, ('startswith(f"{origin}: ")', "startswith(origin)"))


@mutant("D2.3/version-prefix")
def version_prefix() -> Any:
    """The loader accepts any version that starts with a known one, so ``fak-policy/v10``
    reads as v1 and ``fak-policy/v2-draft`` as v2 instead of being refused (the bug)."""
    return edited(
        _policy.parse_policy,
        (
            "if version not in (POLICY_VERSION, POLICY_V2):",
            "if not isinstance(version, str) or not version.startswith("
            "(POLICY_VERSION, POLICY_V2)):",
        ),
        ("v2 = version == POLICY_V2", "v2 = version.startswith(POLICY_V2)"),
    )


# ---------------------------------------------------------------- C4.4 forgotten state
@mutant("C4.4/lru-forgets")
def lru_forgets() -> Any:
    """The ledger evicts its least recently raised mark and forgets it (reads TRUSTED)."""

    def evict(self: MemoryLedger) -> None:
        old, _ = self._marks.popitem(last=False)
        self._bytes -= 96 + len(old.encode("utf-8", "surrogatepass"))
        self.evicted += 1
        self._tomb[:] = bytes(len(self._tomb))

    return mock.patch.object(MemoryLedger, "_evict", evict)


@mutant("C4.4/held-count-only")
def held_count_only() -> Any:
    """Held results are bounded by count only: 8192 of 4 MiB each fit."""
    from fak_core.admission import HeldStore

    real = HeldStore.hold

    def hold(self: HeldStore, payload: str, key: str | None = None, **kw: Any) -> str:
        saved, self.max_bytes = self.max_bytes, 1 << 62
        try:
            return real(self, payload, key, **kw)
        finally:
            self.max_bytes = saved

    return mock.patch.object(HeldStore, "hold", hold)


# ---------------------------------------------------------------- D2.4-D2.6 hostile arguments
_PATH_KEYS = ("path", "file_path", "filePath", "filepath", "file", "target", "filename", "dir")


@mutant("D2.4/first-key-only")
def first_key_only() -> Any:
    """The self-modify guard reads only the first top-level path key (the original bug)."""
    from fak_core.argscan import ArgumentScan
    from fak_core.floor import glob_matches

    real = ArgumentScan.scan

    def scan(self: ArgumentScan, args: dict[str, Any], globs: Any, keys: bool) -> Any:
        _, why, redacted = real(self, args, (), keys)  # hosts and keys as before, no paths
        for key in _PATH_KEYS:
            path = args.get(key)
            if isinstance(path, str) and path:
                for g in globs:
                    if glob_matches(path, g.glob):
                        return g.glob, None, False
                break
        return None, why, redacted

    return mock.patch.object(ArgumentScan, "scan", scan)


@mutant("D2.4/unquoted-words-unread")
def unquoted_words_unread() -> Any:
    """The shell's own reading of the words is made only for a quoted text, so a plain
    word holding a separator the glob holds too (``data,v2/x``) is never read whole (the
    original bug)."""
    from fak_core.selfmodify import PathGuard
    from tests.mutants.sourcepatch import edited

    return edited(
        PathGuard.protected,
        ("else:  # the shell's own reading", "elif quoted:  # the shell's own reading"),
    )


@mutant("D2.4/one-line-header-unread")
def one_line_header_unread() -> Any:
    """Patch headers are read only in a text of several lines, so one header line on its
    own (``*** Update File: My Docs/x``) is not read (the original bug)."""
    from fak_core.selfmodify import PathGuard
    from tests.mutants.sourcepatch import edited

    return edited(
        PathGuard.protected,
        ("if g.any_match(names):", r'if ("\n" in text or "\r" in text) and g.any_match(names):'),
    )


@mutant("D2.4/operators-glued")
def operators_glued() -> Any:
    """The shell's word reader ends a word only at a blank, as :func:`shlex.split` does:
    ``>'My Docs/x'``, ``2>>x``, ``a;b`` stay one word with the operator glued on (the
    original gap)."""
    import re

    from fak_core import selfmodify

    word = re.compile(
        r"""(?:[^ \t\r\n'"\\$]++|\$(?!['"])|\$'(?:[^'\\]++|\\(?:.|\Z))*+(?:'|\Z)"""
        r"""|'[^']*+(?:'|\Z)|\$?"(?:[^"\\]++|\\(?:.|\Z))*+(?:"|\Z)|\\(?:.|\Z))++""",
        re.DOTALL,
    )
    return mock.patch.object(selfmodify, "_WORD", word)


@mutant("D2.4/option-values-unread")
def option_values_unread() -> Any:
    """A word is matched only as a whole path: ``--output=p``, ``of=p``, ``/log:p``,
    ``C:p`` and ``-op`` are not read as naming ``p`` (the original gap)."""
    from fak_core.selfmodify import Gated

    return edited(
        Gated.matches,
        ("for c in self.seps:", "for c in ():"),
        ('if self.cut and p[:1] == "-"', 'if not self.cut and p[:1] == "-"'),
    )


@mutant("D2.4/windows-words-unread")
def windows_words_unread() -> Any:
    """A command string is read only as a POSIX shell reads it: a backslash is always an
    escape, so ``'...'``-less Windows paths (``"C:\\My Docs\\x"`` in cmd's reading,
    ``C:\\data,v2\\x``) lose their separators (the original gap)."""
    from fak_core.selfmodify import command_words

    return edited(command_words, (" + windows_words(text)", ""))


@mutant("D2.4/nested-command-unread")
def nested_command_unread() -> Any:
    """A word that is itself a command string (``sh -c "echo > 'My Docs/x'"``) is not read
    again (the original gap)."""
    from fak_core.selfmodify import posix_words

    return edited(
        posix_words,
        ("words += [w for word in words if _NESTED.search(word)", "words += [w for word in ()"),
    )


@mutant("D2.4/line-continuation-kept")
def line_continuation_kept() -> Any:
    """A backslash-newline is read as an escaped newline, not removed: ``fak_\\<newline>core``
    is two words to the gate (the original bug, found by the generator)."""
    from fak_core import selfmodify

    return edited(selfmodify._unescaped, ('.replace("\\\\\\n", "")', ""))


@mutant("D2.4/ansi-c-unread")
def ansi_c_unread() -> Any:
    """``$'...'`` is read as ``$`` and a single-quoted string: its escapes
    (``$'fak\\x5fcore/x'``) are not decoded (the original gap)."""
    from fak_core import selfmodify

    return mock.patch.object(selfmodify, "ansi_c", lambda body: body)


@mutant("D2.5/top-level-only")
def top_level_only() -> Any:
    """Redaction sees only top-level keys, by their lower-case spelling (the original bug)."""
    from fak_core.argscan import ArgumentScan
    from fak_core.redact import Redactor

    real = ArgumentScan.scan

    def scan(self: ArgumentScan, args: dict[str, Any], globs: Any, keys: bool) -> Any:
        glob, why, _ = real(self, args, globs, False)  # paths and hosts as before
        fields = self.redactor._fields
        return glob, why, keys and any(k.lower() in fields for k in args)

    def redact(self: Redactor, args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        kept = {k: v for k, v in args.items() if k.lower() not in self._fields}
        return kept, sorted(k for k in args if k not in kept)

    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(ArgumentScan, "scan", scan))
    stack.enter_context(mock.patch.object(Redactor, "redact", redact))
    return stack


@mutant("D2.6/suffix-restart")
def suffix_restart() -> Any:
    """A match of any trailing part restarts the matcher at each part (quadratic steps)."""
    from fak_core.globmatch import Glob

    real_run = Glob.run

    def run(self: Glob, text: str, anchored: bool) -> tuple[bool, int]:
        if anchored:
            return real_run(self, text, True)
        starts = [0, *(i + 1 for i, ch in enumerate(text) if ch == "/")]
        total, hit = 0, False
        for s in starts:
            matched, steps = real_run(self, text[s:], True)
            total += steps
            hit = hit or matched
        return hit, total

    return mock.patch.object(Glob, "run", run)


@mutant("D2.6/email-backtracks")
def email_backtracks() -> Any:
    """The e-mail pattern goes back to its backtracking form (quadratic on ``a@....@``)."""
    import re

    return mock.patch.object(_sinks, "_EMAIL", re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$"))


@mutant("D2.6/policy-patterns-backtrack")
def policy_patterns_backtrack() -> Any:
    """Policy-supplied patterns compile with Python's backtracking ``re`` again."""
    import re

    def compile_re(text: str, where: str) -> Any:
        return re.compile(text)

    stack = contextlib.ExitStack()
    for name in ("fak_core.floor", "fak_core.admission", "fak_core.policy"):
        stack.enter_context(mock.patch(f"{name}.compile_policy_pattern", compile_re))
    return stack


@mutant("A7.5/counts-characters")
def counts_characters() -> Any:
    """The arguments limit counts characters of a str, not its UTF-8 bytes (the original bug)."""
    from tests.mutants.sourcepatch import edited

    return edited(
        _jsonargs.parse_args,
        ("if len(raw) > max_bytes >> 2:", "if len(raw) > max_bytes:"),
        ("size = args_nbytes(raw)", "size = len(raw)"),
    )


@mutant("A7.5/inline-counts-characters")
def inline_counts_characters() -> Any:
    """The gateway's inline bound counts characters, so 64 KiB of characters (up to 256 KiB
    of bytes) is decided on the event loop."""
    from fak_core.gateway.state import GatewayState
    from tests.mutants.sourcepatch import edited

    return edited(GatewayState._inline, ("args_nbytes(call.args)", "len(call.args)"))


# ---------------------------------------------------------------- C4.5 result screen
_admission = importlib.import_module("fak_core.admission")


@mutant("C4.5/text-prefix-stubs")
def text_prefix_stubs() -> Any:
    """Take any result whose text starts like a stub for the kernel's own (the old is_stub)."""

    def is_minted(self: Any, text: str) -> bool:
        return text.startswith(('{"_quarantined":true', '{"_paged":true'))

    return mock.patch.object(_admission.ResultScreen, "is_minted", is_minted)


@mutant("C4.5/no-stub-registry")
def no_stub_registry() -> Any:
    """The screen never recognises its own stubs: every re-admitted stub is screened."""

    def is_minted(self: Any, text: str) -> bool:
        return False

    return mock.patch.object(_admission.ResultScreen, "is_minted", is_minted)


@mutant("C4.5/raw-markers")
def raw_markers() -> Any:
    """Match injection markers on the lower-cased raw text, without normalisation."""
    return mock.patch.object(_admission, "_views", lambda text: (text.lower(),))


@mutant("C4.5/surrogate-raises")
def surrogate_raises() -> Any:
    """The policy's secret patterns search a result holding a lone surrogate as it is: RE2
    reads UTF-8, cannot encode it, and the admitter raises (the original bug)."""

    def has_secret(self: Any, text: str) -> bool:
        extra = self._extra_secret
        return self._secret.search(text) is not None or (
            extra is not None and extra.search(text) is not None
        )

    return mock.patch.object(_admission.ResultScreen, "_has_secret", has_secret)


@mutant("C4.5/raw-secrets")
def raw_secrets() -> Any:
    """Search secret shapes in the raw text only."""
    return mock.patch.object(_admission, "_stripped", lambda text: text)


# ------------------------------------------------------------ A7.6 linear schema regexes
_schemas = importlib.import_module("fak_core.schemas")


@mutant("A7.6/rs-backtracks")
def rs_backtracks() -> Any:
    """The compiled validator uses jsonschema-rs's default engine, fancy-regex, which
    backtracks (lookaround, backreferences) instead of the linear ``regex`` crate."""
    return mock.patch.object(_schemas, "LINEAR", None)


@mutant("A7.6/exact-path-re")
def exact_path_re() -> Any:
    """The exact path (schemas with ``multipleOf``) matches regexes with Python's ``re``,
    as plain ``jsonschema`` does (the original bug)."""
    return mock.patch.object(_schemas, "exact_validator_class", lambda cls: cls)


@mutant("A7.6/silent-fallback")
def silent_fallback() -> Any:
    """A pattern the linear engine refuses is not refused: the schema silently falls back
    to jsonschema-rs's backtracking default (and ``re`` on the exact path)."""
    import jsonschema_rs

    from fak_core.schemas import InvalidSchemaError

    real = _schemas._fast_validator

    def fast_validator(doc: Any, label: str) -> Any:
        try:
            return real(doc, label)
        except InvalidSchemaError:
            return jsonschema_rs.validator_for(doc, validate_formats=False)

    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(_schemas, "_fast_validator", fast_validator))
    stack.enter_context(mock.patch.object(_schemas, "exact_validator_class", lambda cls: cls))
    return stack


# ------------------------------------------------------- A7.7 linear schema keywords
@mutant("A7.7/quadratic-unique")
def quadratic_unique() -> Any:
    """The exact path decides ``uniqueItems`` with ``jsonschema``'s own implementation
    (sort and compare neighbours, else compare every pair): the original bug."""
    import jsonschema.validators
    from jsonschema import _keywords

    from fak_core.schemaregex import LINEAR_KEYWORDS, QUADRATIC_KEYWORDS

    def exact(cls: Any) -> Any:
        keywords = {**LINEAR_KEYWORDS, **QUADRATIC_KEYWORDS}
        keywords["uniqueItems"] = _keywords.uniqueItems
        return jsonschema.validators.extend(cls, keywords)

    return mock.patch.object(_schemas, "exact_validator_class", exact)


@mutant("A7.4/non-finite-schemas")
def non_finite_schemas() -> Any:
    """Schemas are not checked for NaN and infinity: ``{"const": NaN}`` compiles, and
    jsonschema-rs reads it as ``{"const": null}`` (the bug)."""
    import fak_core.schemas as schemas_mod

    return edited(
        schemas_mod.compile_schema, ("if (where := _non_finite(doc)) is not None:", "if False:")
    )


@mutant("C4.11/tombstone-shared")
def tombstone_shared() -> Any:
    """The ledger before C4.11: the least recently raised mark of anyone is evicted, every
    lookup joins the shared tombstone bucket, and a begun session is not told apart (no
    entry for a TRUSTED trace): one owner's flood taints everyone's fresh sessions."""

    def level(self: MemoryLedger, trace_id: str) -> Taint:
        live = self._marks.get(trace_id, Taint.TRUSTED)
        if not self.evicted:
            return live
        buried = Taint(self._tomb[self._bucket(trace_id)])
        return live if live >= buried else buried

    def heaviest(self: MemoryLedger) -> str:
        return self._owner[next(iter(self._marks))]

    def begin(self: MemoryLedger, trace_id: str, owner: str = "") -> None:
        return None

    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(MemoryLedger, "level", level))
    stack.enter_context(mock.patch.object(MemoryLedger, "_heaviest", heaviest))
    stack.enter_context(mock.patch.object(MemoryLedger, "begin", begin))
    return stack


@mutant("C4.11/ledger-undercounts")
def ledger_undercounts() -> Any:
    """The ledger's byte count before it was measured: 96 bytes a mark beyond its id and
    nothing for an owner, a third to an eighth of what the marks hold (the bug): the
    64 MiB bound held several times that."""
    import fak_core.ledger as ledger_mod

    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(ledger_mod, "ENTRY_OVERHEAD", 96))
    stack.enter_context(mock.patch.object(ledger_mod, "OWNER_OVERHEAD", 0))
    return stack
