"""One walk over a call's parsed arguments for the capability floor's three readings.

The floor asks three questions of the arguments: does a key or a string name a protected
path (the self-modify guard, :class:`fak_core.selfmodify.PathGuard`, for a write-shaped
tool), does a string name a denied host (:class:`fak_core.hosts.HostDenyList`), and does a
key name a redacted field (:class:`fak_core.redact.Redactor`, for an allowed tool under a
policy that redacts). :meth:`ArgumentScan.scan` answers all three in one pass: every
object, array and string at every depth is visited once (breadth first, through a list
the walk appends to, no recursion), and each question still open is asked with its own exact check:
:meth:`PathGuard.protected` of every key and string, :meth:`HostDenyList.check` of every
string the quick screen (:meth:`HostDenyList.plain`) cannot clear, and
:meth:`Redactor.hit` of every key of an object whose keys are not all known to be clean.

A question stops being asked once it is answered: a protected path ends the walk (it
decides the call); a denied host ends it unless paths are still looked for; the first
redacted key stops the key test. Nothing is skipped that could change the decision.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fak_core.hosts import HostDenyList
from fak_core.redact import Redactor
from fak_core.selfmodify import Gated, PathGuard

__all__ = ["ArgumentScan", "ScanResult"]

#: (the protected glob named, why a host is denied, whether a redacted key occurs)
ScanResult = tuple[str | None, str | None, bool]
_NOTHING: ScanResult = (None, None, False)


class ArgumentScan:
    """The floor's three readings under one policy, made in one walk."""

    __slots__ = ("_check", "_clean", "_hit", "_plain", "_protected", "_words", "hosts", "redactor")

    def __init__(self, guard: PathGuard, hosts: HostDenyList | None, redactor: Redactor) -> None:
        self.hosts = hosts
        self.redactor = redactor
        # bound once: the walk runs on every decision
        self._protected = guard.protected
        self._clean, self._hit = redactor.clean, redactor.hit
        # (without a deny list the walk never asks: these two are never called)
        self._plain: Callable[[str], bool] = bool if hosts is None else hosts.plain
        self._check: Callable[[str], str | None] = str if hosts is None else hosts.check
        # an ASCII word of letters names no host but itself, unless a one-label name is
        # denied: the first case of the quick screen, inlined
        self._words = hosts is not None and not hosts.single

    def scan(self, args: dict[str, Any], globs: tuple[Gated, ...], keys: bool) -> ScanResult:
        """Walk ``args`` once: the first of ``globs`` a key or string names (self-modify;
        empty: not asked), why a string names a denied host (when the policy denies hosts),
        and whether a key is a redacted field (asked only when ``keys``)."""
        hosts = self.hosts is not None
        if not (globs or keys or hosts):
            return _NOTHING
        plain, check, words = self._plain, self._check, self._words
        clean, hit, protected = self._clean, self._hit, self._protected
        why: str | None = None
        redacted = False
        todo: list[Any] = [args]  # every object and array met; grows as the walk reads
        for value in todo:
            if type(value) is dict:
                if keys and not value.keys() <= clean:
                    for k in value:
                        if k not in clean and hit(k):
                            redacted, keys = True, False
                            break
                if globs:
                    for k in value:
                        glob = protected(k, globs)
                        if glob is not None:
                            return glob, None, False
                value = value.values()
            elif type(value) is not list:  # only objects and arrays are ever queued
                continue
            for v in value:
                kind = type(v)
                if kind is str:
                    if globs:
                        glob = protected(v, globs)
                        if glob is not None:
                            return glob, None, False
                    if hosts and not (words and v.isalpha() and v.isascii()) and not plain(v):
                        why = check(v)
                        if why is not None:
                            if not globs:
                                return None, why, False
                            hosts = False  # denied: only a protected path can still matter
                elif kind is dict or kind is list:
                    todo.append(v)
        return None, why, redacted
