"""Identifier pointers read by RFC 6901 (C4.9): a hand-written table of pointers into one
fixed result, each with the values it names, written from the RFC (``~1`` is ``/``, ``~0``
is ``~``, decoded in that order; an array index is ``0`` or ASCII digits without a leading
zero, below the array's length; a member name is any string, the empty one and digits
included), from the theorem's ``*`` (every element or member) and last token ``~keys``
(the member names of an object), and from the empty pointer (the whole result). Each
pointer is declared alone; after the result is admitted, every value of the result (and
its member names) is offered as a destination in the tainted session, and exactly the
values the pointer names pass.
"""

from __future__ import annotations

import json

import pytest

from fak_core import Kernel, Policy, Result, Status, ToolCall, ToolDecl, VerdictKind
from fak_core.grounding import _canonical
from fak_core.taint import Taint

ELEVEN = [f"item{i}value" for i in range(11)]
RESULT = {
    "a/b": "slashvalue",
    "m~n": "tildevalue",
    "~1": "escapedvalue",
    "": "emptykeyvalue",
    "0": "zerokeyvalue",
    "01": "leadingzerokeyvalue",
    "list": ELEVEN,
    "people": [{"to": "firstto", "cc": "firstcc"}, {"to": "secondto"}, "loosestring"],
    "table": {"tablex": "xvalue", "tabley": ["yvalue", True, 77001234]},
    "shares": {"alice@example.com": "reader", "bob@example.com": "writer"},
    "text": "plainstring",
    "number": 12345678,
    "flag": True,
}
EVERYTHING = [
    *ELEVEN,
    "slashvalue",
    "tildevalue",
    "escapedvalue",
    "emptykeyvalue",
    "zerokeyvalue",
    "leadingzerokeyvalue",
    "firstto",
    "firstcc",
    "secondto",
    "loosestring",
    "xvalue",
    "yvalue",
    "77001234",
    "tablex",
    "tabley",
    "alice@example.com",
    "bob@example.com",
    "reader",
    "writer",
    "plainstring",
    "12345678",
    "true",
    "list",
    "people",
    "table",
    "shares",
    "text",
    "number",
    "flag",
    "to",
    "cc",
]

POINTERS: list[tuple[str, list[str]]] = [
    ("/a~1b", ["slashvalue"]),
    ("/m~0n", ["tildevalue"]),
    ("/~01", ["escapedvalue"]),  # "~01" is "~1" (~1 first, then ~0), not "/"
    ("/~1", []),  # the member "/" (there is none)
    ("/", ["emptykeyvalue"]),  # the member named ""
    ("/0", ["zerokeyvalue"]),  # in an object "0" is a name
    ("/01", ["leadingzerokeyvalue"]),  # and so is "01"
    ("", []),  # the whole result: a table, no value
    ("/list", ELEVEN),
    ("/list/0", ELEVEN[:1]),
    ("/list/1", ELEVEN[1:2]),
    ("/list/10", ELEVEN[10:]),
    ("/list/11", []),  # past the end
    ("/list/01", []),  # a leading zero is no index
    ("/list/00", []),
    ("/list/-", []),
    ("/list/-1", []),
    ("/list/+1", []),
    ("/list/1x", []),
    ("/list/x", []),
    ("/list/", []),
    ("/list/\u0661", []),  # ARABIC-INDIC DIGIT ONE: a digit, not an ASCII one
    ("/list/\u00b2", []),  # SUPERSCRIPT TWO: a digit to str.isdigit, not to int()
    ("/list/*", ELEVEN),
    ("/list/~keys", []),  # an array has no member names
    ("/people/*/to", ["firstto", "secondto"]),
    ("/people/0/to", ["firstto"]),
    ("/people/*", ["loosestring"]),  # tables are no values
    ("/people/*/~keys", ["to", "cc"]),
    ("/table/*", ["xvalue", "yvalue", "77001234"]),  # a list found: its strings and ints
    ("/table/tabley/1", []),  # a boolean
    ("/table/tabley/2", ["77001234"]),
    ("/table/~keys", ["tablex", "tabley"]),
    ("/shares/~keys", ["alice@example.com", "bob@example.com"]),
    ("/shares/*", ["reader", "writer"]),
    ("/~keys", [*(k for k in RESULT if k)]),  # the empty name is blank: skipped
    ("/text", ["plainstring"]),
    ("/text/0", []),  # a string has no members
    ("/text/*", []),
    ("/text/~keys", []),
    ("/number", ["12345678"]),
    ("/number/0", []),
    ("/flag", []),
    ("/*/to", []),  # the members' "to": none of them is a table with one
    ("/*/0", ["item0value"]),
    ("/*/*/to", ["firstto", "secondto"]),
]


def _kernel(pointer: str) -> Kernel:
    return Kernel(
        Policy(
            version="fak-policy/v2",
            allow=("inbox", "send"),
            sources={"inbox": "untrusted"},
            tools={
                "inbox": ToolDecl("NONE", identifiers=(pointer,)),
                "send": ToolDecl("EGRESS", ("/to",)),
            },
        )
    )


@pytest.mark.fak_theorem("C4.9")
@pytest.mark.parametrize(("pointer", "named"), POINTERS)
def test_a_pointer_names_what_rfc_6901_says_and_nothing_else(
    pointer: str, named: list[str]
) -> None:
    _canonical.cache_clear()  # a canonical form the real code cached must not answer
    k = _kernel(pointer)
    call = ToolCall("inbox", "{}", "s")
    assert k.decide(call).kind == VerdictKind.ALLOW
    k.admit(call, Result(Status.OK, json.dumps(RESULT), taint=Taint.TRUSTED))
    assert k.taint("s") == Taint.TAINTED
    for value in [*EVERYTHING, "a/b", "m~n", "~1", "0", "01"]:
        sent = k.decide(ToolCall("send", json.dumps({"to": value}), "s"))
        assert (sent.kind == VerdictKind.ALLOW) == (value in named), (pointer, value, sent)
