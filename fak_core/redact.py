"""Redaction of named fields at any depth of a call's arguments.

A key is redacted when its normalised spelling equals a normalised ``redact_fields``
entry. Normalisation lower-cases the name and drops ``-``, ``_``, ``.`` and spaces, so
``password``, ``Password``, ``PASSWORD`` match ``password`` and ``api_key``, ``api-key``,
``apiKey``, ``API KEY`` all match ``api_key``. It is equality after normalisation, not a
substring test: ``password_hint`` and ``max_tokens`` are not redacted by ``password`` and
``token``. Keys are matched in every object at every depth, including objects inside
arrays: the floor finds them in its one walk over the arguments
(:class:`fak_core.argscan.ArgumentScan`, asking :meth:`Redactor.hit`), and
:meth:`Redactor.redact` rewrites them. Both are iterative (no recursion, whatever the
nesting) and visit each value once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["Redactor", "normalise_field"]

_DROP = str.maketrans("", "", "-_. ")
_MEMO_LIMIT = 4096


def normalise_field(name: str) -> str:
    """A field name as redaction compares it: lower case, without ``-``, ``_``, ``.``, spaces."""
    return name.lower().translate(_DROP)


class Redactor:
    """The redacted field names of one policy."""

    def __init__(self, fields: Iterable[str]) -> None:
        self._fields = frozenset(normalise_field(f) for f in fields)
        #: Keys known not to be redacted fields (bounded): an object all of whose keys are
        #: here has none to redact, which one C-level subset test tells
        #: (``obj.keys() <= clean``, :mod:`fak_core.argscan`).
        self.clean: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self._fields)

    def hit(self, key: str) -> bool:
        """Whether ``key`` is a redacted field; a key that is not joins :attr:`clean`
        (key names repeat from call to call; the set is bounded)."""
        if normalise_field(key) in self._fields:
            return True
        clean = self.clean
        if len(clean) >= _MEMO_LIMIT:
            clean.clear()
        clean.add(key)
        return False

    def redact(self, args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """A copy of ``args`` without the redacted keys (at any depth), and their sorted,
        de-duplicated names as sent."""
        hit, clean = self.hit, self.clean
        dropped: set[str] = set()
        out: dict[str, Any] = {}
        stack: list[tuple[Any, Any]] = [(args, out)]
        copy: dict[str, Any] | list[Any]
        pop, push = stack.pop, stack.append
        while stack:
            src, dst = pop()
            if type(src) is dict:
                for k, v in src.items():
                    if k not in clean and hit(k):
                        dropped.add(k)
                        continue
                    if type(v) is dict or type(v) is list:
                        dst[k] = copy = {} if type(v) is dict else []
                        push((v, copy))
                    else:
                        dst[k] = v
            else:
                for v in src:
                    if type(v) is dict or type(v) is list:
                        copy = {} if type(v) is dict else []
                        dst.append(copy)
                        push((v, copy))
                    else:
                        dst.append(v)
        return out, sorted(dropped)
