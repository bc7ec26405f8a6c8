"""Percent-encoding in a URL's path and query (C4.6), by RFC 3986's normalisation (6.2.2):
the hex digits of a triplet in upper case, an unreserved character decoded, every other
triplet kept as a triplet. Hand-written pairs say whether two spellings name one place,
and a hand-priced text says what its canonical forms cost (each form's UTF-8 bytes plus
48), so a form spelt longer or shorter shows in the store's bytes.
"""

from __future__ import annotations

import pytest

from fak_core.grounding import GroundingStore, _canonical

PAIRS = [
    ("x.org/a%2Fb", "x.org/a%2fb", True),  # hex case
    ("x.org/%7Euser", "x.org/~user", True),  # "~" is unreserved: decoded
    ("x.org/%41%42", "x.org/AB", True),
    ("x.org/a%2Fb", "x.org/a2Fb", False),  # "/" is reserved: its triplet stays one
    ("x.org/a%2Fb", "x.org/a/b", False),
    ("x.org/a%2Fb", "x.org/a%252Fb", False),  # "%25" is "%", kept encoded
    ("x.org/?q=%3d", "x.org/?q=%3D", True),
    ("x.org/?q=%3D", "x.org/?q=3D", False),
    ("x.org/?q=%3D", "x.org/?q==", False),
]


@pytest.fixture(autouse=True)
def _fresh_canonical_forms() -> None:
    """A canonical form the real code cached must not answer for a mutant."""
    _canonical.cache_clear()


@pytest.mark.fak_theorem("C4.6")
@pytest.mark.parametrize(("said", "sent", "same"), PAIRS)
def test_percent_encodings_name_one_place_by_rfc_3986(said: str, sent: str, same: bool) -> None:
    store = GroundingStore()
    store.record_trusted("s", f"pay {said} today")
    assert store.grounded("s", sent) is same
    assert store.grounded("s", said) is True


@pytest.mark.fak_theorem("C4.6")
def test_a_text_with_triplets_costs_its_canonical_forms() -> None:
    """The words ' see x.org/a%2fb and x.org/%7euser ' (35 bytes); the forms: the words
    (3 + 11 + 3 + 13 bytes, each + 48) and two URLs, ``x.org/a%2Fb`` and ``x.org/~user``
    (11 bytes each, + 48): 340; the text 96 more and the session 96 + 1: 568."""
    store = GroundingStore()
    store.record_trusted("s", "see x.org/a%2fb and X.org/%7euser")
    assert store.stats()["grounding_bytes"] == 35 + 340 + 96 + 97
