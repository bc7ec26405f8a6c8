"""D10.4 at two edges of what the gateway reads: the name of a refused kind, and base64
sources that do not decode cleanly.

A role, part type or block type the gateway does not classify is refused with a 400 that
names it as its Python ``repr``, cut to 77 characters and ``...`` when longer than 80: the
expected names are written out here by hand at the cut (reprs of 80 and 81 characters),
well past it, empty, and for values that are not strings. A base64 source is screened as
what it reads as: data that is not base64 as the text it is (so a secret split across two
such documents is read whole), and a text-typed document as its text with invalid bytes
replaced. The oracle for the screen is the kernel's documented verdict (a built-in secret
shape quarantines: the upstream gets the kernel's stub); the base64 data is written with
the standard library.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import pytest

from .test_carrier_screen import check_rewritten, turn

#: (the value sent, the name the refusal must show), written by hand.
NAMES: list[tuple[Any, str]] = [
    ("x" * 78, "'" + "x" * 78 + "'"),  # a repr of 80 characters: shown whole
    ("x" * 79, "'" + "x" * 76 + "..."),  # 81: cut to 77 and marked
    ("y" * 300, "'" + "y" * 76 + "..."),
    ("", "''"),
    ("bad'type", '"bad\'type"'),
]
#: Values that are no string: only a role shows them (a part or block type that is no
#: string is refused as such).
ODD_ROLES: list[tuple[Any, str]] = [(7, "7"), (None, "None"), (["a"], "['a']"), (1.5, "1.5")]


def _message(r: Any) -> str:
    doc = r.json()
    return str(doc["error"]["message"])


def _refused(wire: str, messages: list[dict[str, Any]]) -> str:
    r, _, _ = turn(wire, messages)
    assert r.status_code == 400, r.text[:300]
    return _message(r)


@pytest.mark.fak_theorem("D10.4")
def test_an_unknown_role_is_named_as_its_repr_cut_at_80() -> None:
    for value, shown in NAMES + ODD_ROLES:
        msg = _refused("openai", [{"role": value, "content": "hi"}])
        assert f"messages[0].role: unsupported role {shown}; " in msg, (value, msg)


@pytest.mark.fak_theorem("D10.4")
def test_an_unknown_part_type_is_named_as_its_repr_cut_at_80() -> None:
    for value, shown in NAMES:
        part = {"type": value, "text": "hi"}
        msg = _refused("openai", [{"role": "user", "content": [part]}])
        want = f"messages[0].content[0].type: unsupported content part type {shown} for role "
        assert want in msg, (value, msg)


@pytest.mark.fak_theorem("D10.4")
def test_an_unknown_block_type_is_named_as_its_repr_cut_at_80() -> None:
    for value, shown in NAMES:
        block = {"type": value, "text": "hi"}
        msg = _refused("anthropic", [{"role": "user", "content": [block]}])
        assert f"messages.0.content.0.type: unsupported block type {shown}; " in msg, (value, msg)


#: A built-in secret shape (a PEM private key header) cut into two halves that are each no
#: base64 (``-`` and the blank are outside its alphabet), though the first's base64 letters
#: alone would decode. A shape of fixed ends: an open-ended one (``sk-`` and any 20
#: identifier characters) is also completed by the neighbouring fields' words.
SPLIT = ("-----BEGIN PRI", "VATE KEY-----")


def _document(data: str, mime: str) -> dict[str, Any]:
    return {"type": "document", "source": {"type": "base64", "media_type": mime, "data": data}}


def _not_base64(data: str) -> bool:
    try:
        base64.b64decode(data, validate=True)
    except binascii.Error:
        return True
    return False


@pytest.mark.fak_theorem("D10.4")
@pytest.mark.parametrize("mime", ["application/pdf", "text/plain", "image/png"])
def test_data_that_is_not_base64_reads_as_itself(mime: str) -> None:
    assert all(_not_base64(half) for half in SPLIT)
    halves = [_document(half, mime) for half in SPLIT]
    check_rewritten("anthropic", halves, "RESULT_SECRET_DISCOVERED")
    between = [halves[0], {"type": "text", "text": ""}, halves[1]]
    check_rewritten("anthropic", between, "RESULT_SECRET_DISCOVERED")


@pytest.mark.fak_theorem("D10.4")
def test_a_text_document_with_invalid_bytes_reads_as_its_text() -> None:
    raw = b"\xff\xfe the key is AKIAIOSFODNN7EXAMPLE \xc3("
    data = base64.b64encode(raw).decode()
    for mime in ("text/plain", "application/json; charset=utf-8"):
        check_rewritten("anthropic", [_document(data, mime)], "RESULT_SECRET_DISCOVERED")
