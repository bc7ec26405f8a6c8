"""Identifier fields of tool results (policy v2): whole values the system keeps.

A ``fak-policy/v2`` tool declaration may list ``identifiers``: JSON Pointers (RFC 6901)
into the tool's result read as JSON, where a token ``*`` stands for every element of an
array and every member of an object. The operator declares there the fields that name
entities the *system* keeps (the sender and recipient of a bank transaction, the channels
of a workspace, the members of a channel, the participants of a calendar event), as
opposed to text a third party wrote (a subject, a message body, a review). Such a field
cannot be written by the words of an injection: whoever fills it has to exist in the
system (have an account, be a member, have sent the money).

A pointer's last token may be ``~keys`` (never a token of RFC 6901, where ``~`` is
followed by ``0`` or ``1``): it stands for the member *names* of each object found there,
so a table keyed by identity (a file's sharing list ``{address: permission}``) names its
keys as identifiers; an array, a string or a number has no member names.

Each string or integer found at an identifier pointer grounds a destination equal to it
in canonical form (:func:`fak_core.grounding.canonical_value`), *as a whole value*
(:meth:`fak_core.grounding.GroundingStore.record_identifiers`): the words inside it, and
any value elsewhere in the result, ground nothing, and the result keeps its taint. A
result that is not JSON, or is longer than :data:`MAX_RESULT_CHARS`, names no
identifiers (fail-closed); at most :data:`MAX_IDENTIFIERS` values are taken from one
result. Extraction visits each node of the parsed result at most once per pointer.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["KEYS", "MAX_IDENTIFIERS", "MAX_RESULT_CHARS", "identifier_values"]

#: A result longer than this (in characters) names no identifiers.
MAX_RESULT_CHARS = 1 << 20
#: At most this many identifier values are taken from one result.
MAX_IDENTIFIERS = 4096
#: A pointer's last token standing for the member names of the objects found there.
KEYS = "~keys"


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _step(node: Any, token: str, out: list[Any]) -> None:
    """Append the children of ``node`` that ``token`` names (``*``: every child)."""
    if type(node) is dict:
        if token == KEYS:
            out.extend(node)  # the member names (only as the last token: see the parser)
        elif token == "*":
            out.extend(node.values())
        elif token in node:
            out.append(node[token])
    elif type(node) is list:
        if token == "*":
            out.extend(node)
        elif token.isascii() and token.isdigit() and (token == "0" or not token.startswith("0")):
            i = int(token)
            if i < len(node):
                out.append(node[i])


def identifier_values(payload: str, pointers: tuple[str, ...]) -> list[str]:
    """The identifier values of a result: every string or integer (booleans excluded) at
    one of ``pointers`` in ``payload`` read as JSON, each as text; a list found at a
    pointer gives its string and integer elements; a last token ``~keys`` gives the member
    names of the objects found before it. Not JSON, or too long: none."""
    if not pointers or len(payload) > MAX_RESULT_CHARS:
        return []
    try:
        doc = json.loads(payload)
    except (ValueError, RecursionError):
        return []
    found: list[str] = []
    for pointer in pointers:
        frontier = [doc]
        for token in _tokens(pointer):
            nxt: list[Any] = []
            for node in frontier:
                _step(node, token, nxt)
            frontier = nxt
        for value in frontier:
            items = value if type(value) is list else (value,)
            for item in items:
                if type(item) is str or type(item) is int:
                    found.append(str(item))
                    if len(found) >= MAX_IDENTIFIERS:
                        return found
    return found
