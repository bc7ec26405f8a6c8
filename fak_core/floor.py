"""The capability floor: the rank-100 monitor that allows only what the policy allows.

Order of checks: the deny map; unparseable arguments; self-modification (a write-shaped
tool aimed at a protected path); per-argument rules; denied egress hosts (every string
argument, read by ``fak_core.hosts`` in canonical form); then, for an
allowed tool, redaction (TRANSFORM) or ALLOW; everything else is DEFAULT_DENY. The
protected paths, denied hosts and redacted keys are read in one walk over the arguments
(:mod:`fak_core.argscan`); the order above is the order their verdicts take. Under the
opt-in posture ``admit_and_log`` a default deny becomes an ALLOW that records it.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

import orjson

from fak_core.argscan import ArgumentScan
from fak_core.globmatch import compile_glob
from fak_core.hosts import HostDenyList
from fak_core.nonblocking import nonblocking
from fak_core.patterns import compile_policy_pattern
from fak_core.policy import ArgRule, Policy
from fak_core.reasons import Reason, ReasonRegistry
from fak_core.redact import Redactor
from fak_core.selfmodify import Gated, PathGuard, glob_pattern
from fak_core.verdicts import Verdict
from fak_core.view import CallView

__all__ = ["CapabilityFloor", "glob_matches", "is_write_shaped", "own_name", "prefix_allows"]

BY = "floor"
_ALLOWED = Verdict.allow(BY)
_WRITE = re.compile(r"write|edit|delete|patch|put|exec|run|modify|create|move|rename|remove|save")


def is_write_shaped(tool: str) -> bool:
    """Whether a tool name says it writes, edits, deletes, runs or creates something."""
    return bool(_WRITE.search(tool.lower()))


def own_name(tool: str, separator: str) -> str:
    """A scoped ``<server><separator><tool>`` name's own tool name (after the first
    separator); the whole name when unscoped or when it has no separator."""
    if separator:
        _, sep, own = tool.partition(separator)
        if sep:
            return own
    return tool


def prefix_allows(prefixes: tuple[str, ...], tool: str, separator: str = "") -> bool:
    """Whether an ``allow_prefix`` entry covers ``tool``.

    Unscoped (``separator`` empty) a prefix matches the name. Scoped (the MCP proxy's
    aggregated ``<server>__<tool>`` names), a prefix without the separator matches only
    the tool's own name, so a server's name can never satisfy it; a prefix that contains
    the separator names a server explicitly and matches the whole scoped name.
    """
    if not prefixes:
        return False
    if not separator:
        return tool.startswith(prefixes)
    own = own_name(tool, separator)
    for p in prefixes:
        if (separator in p and tool.startswith(p)) or (separator not in p and own.startswith(p)):
            return True
    return False


def glob_matches(path: str, glob: str, anchored: bool = False) -> bool:
    """Whether ``glob`` matches ``path`` (``anchored``) or else any trailing part of it.

    A glob ending in ``/`` covers everything under that directory. Paths are normalised
    first, so ``a/../fak_core/x`` and ``./fak_core/x`` are both under ``fak_core/``. The
    glob means what :func:`fnmatch.fnmatchcase` says (``*`` and ``?`` cross ``/``);
    matching is one pass over the path, whatever its length or number of parts
    (:mod:`fak_core.globmatch`).
    """
    p = posixpath.normpath(path.replace("\\", "/"))
    return compile_glob(glob_pattern(glob)).run(p, anchored)[0]


@nonblocking
class CapabilityFloor:
    """The default-deny monitor over one :class:`Policy`."""

    def __init__(self, policy: Policy, reasons: ReasonRegistry | None = None) -> None:
        self.reasons = reasons if reasons is not None else ReasonRegistry()
        self._write_memo: dict[str, bool] = {}
        #: Set by :meth:`scope_names`: tool names are ``<scope><separator><tool>``.
        self.separator = ""
        self.set_policy(policy)

    def scope_names(self, separator: str) -> None:
        """Read tool names as ``<server><separator><tool>`` (the MCP proxy's aggregated
        names): an ``allow_prefix`` entry then matches the tool's own name unless it
        contains the separator (:func:`prefix_allows`), and a ``deny`` entry without the
        separator denies that tool on every server. Exact ``allow`` names still match the
        whole scoped name only."""
        self.separator = separator

    def set_policy(self, policy: Policy) -> None:
        code = self.reasons.code
        self.policy = policy
        self._deny = {tool: code(name) for tool, name in policy.deny.items()}
        self._allow = frozenset(policy.allow)
        self._prefixes = tuple(policy.allow_prefix)
        self._globs = tuple(policy.self_modify_globs)
        self._guard = PathGuard(self._globs)
        self._redact = Redactor(policy.redact_fields)
        self._redacts = bool(policy.redact_fields)
        # every string in the arguments is read as a URL and as a host (fak_core.hosts)
        self._hosts = HostDenyList(policy.deny_hosts) if policy.deny_hosts else None
        self._scan = ArgumentScan(self._guard, self._hosts, self._redact)
        rules: dict[str, list[tuple[ArgRule, Any, int]]] = {}
        for i, r in enumerate(policy.arg_rules):
            compiled = (
                compile_policy_pattern(r.deny_regex, f"arg_rules[{i}].deny_regex")
                if r.deny_regex is not None
                else None
            )
            rules.setdefault(r.tool.lower(), []).append((r, compiled, code(r.reason)))
        self._rules = rules
        self._log_only = policy.posture == "admit_and_log"

    def adjudicate(self, view: CallView) -> Verdict:
        tool = view.call.tool
        denied = self._deny.get(tool)
        if denied is None and self.separator:
            denied = self._deny.get(own_name(tool, self.separator))
        if denied is not None:
            return Verdict.deny(denied, BY, claim=f"policy denies tool {tool}")
        args = view.args()
        if args is None:
            return Verdict.deny(Reason.MALFORMED, BY, claim="arguments are not a JSON object")
        allowed = tool in self._allow or prefix_allows(self._prefixes, tool, self.separator)
        v = self._arguments(view, tool, args, allowed)
        if v is not None:
            return v
        if allowed:
            return _ALLOWED
        if self._log_only:
            return Verdict.allow(
                BY, meta={"posture": "admit_and_log", "would_deny": "DEFAULT_DENY"}
            )
        return Verdict.deny(Reason.DEFAULT_DENY, BY, claim=f"no policy rule allows tool {tool}")

    def _arguments(
        self, view: CallView, tool: str, args: dict[str, Any], allowed: bool
    ) -> Verdict | None:
        """What the arguments decide, in this order: a protected path named by a
        write-shaped tool (SELF_MODIFY), a per-argument rule, a denied host (EGRESS_BLOCK),
        a redacted key of an allowed tool (TRANSFORM); None when they decide nothing.

        Paths, hosts and keys are read in one walk (:class:`fak_core.argscan.ArgumentScan`),
        asking for paths only the globs the raw text can name."""
        globs: tuple[Gated, ...] = ()
        if self._globs:
            write = self._write_memo.get(tool)
            if write is None:
                write = self._write_shaped(tool)
            if write:
                globs = self._guard.candidates(view.call.args)
        glob, why, redacted = self._scan.scan(args, globs, allowed and self._redacts)
        if glob is not None:
            return Verdict.deny(Reason.SELF_MODIFY, BY, claim=glob)
        if self._rules:
            rules = self._rules.get(tool.lower())
            if rules:
                v = self._arg_rules(rules, args)
                if v is not None:
                    return v
        if why is not None:
            return Verdict.deny(Reason.EGRESS_BLOCK, BY, claim=why)
        if redacted:
            kept, dropped = self._redact.redact(args)
            return Verdict.transform(
                orjson.dumps(kept).decode("utf-8"), BY, meta={"redacted": ",".join(dropped)}
            )
        return None

    def _write_shaped(self, tool: str) -> bool:
        # memoised per floor: tool names repeat; the memo is bounded and private
        memo = self._write_memo
        hit = memo.get(tool)
        if hit is None:
            if len(memo) >= 4096:
                memo.clear()
            hit = memo[tool] = is_write_shaped(tool)
        return hit

    def _arg_rules(
        self, rules: list[tuple[ArgRule, Any, int]], args: dict[str, Any]
    ) -> Verdict | None:
        for rule, regex, reason in rules:
            present = rule.arg in args
            value = args.get(rule.arg)
            text = (
                value
                if isinstance(value, str)
                else (orjson.dumps(value).decode("utf-8") if present else "")
            )
            if rule.allow_glob is not None:
                if (
                    not present
                    or not isinstance(value, str)
                    or not glob_matches(value, rule.allow_glob, anchored=True)
                ):
                    return Verdict.deny(
                        reason, BY, claim=f"{rule.arg} must match {rule.allow_glob}"
                    )
            elif regex is not None:
                if present and regex.search(text):
                    return Verdict.deny(reason, BY, claim=f"{rule.arg} matches {rule.deny_regex}")
            elif (
                rule.max_bytes is not None
                and present
                and len(text.encode("utf-8")) > rule.max_bytes
            ):
                return Verdict.deny(reason, BY, claim=f"{rule.arg} is over {rule.max_bytes} bytes")
        return None
