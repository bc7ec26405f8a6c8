"""A lone ``%`` in a URL's path or query is the character itself (C4.6's canonical form).

The canonicaliser decoded an unreserved triplet right after a lone ``%``, so the two became
a new triplet: ``x.org/%%341`` (the text ``%41``: a ``%``, then ``%34`` for ``4``, then
``1``) had the form ``x.org/%41``, which is the letter ``A``, and canonicalised again gave
``x.org/A``: the canonical form of a canonical form was another place. The witness builds
paths and queries from lone ``%``, cut triplets (``%2``, ``%4``), ``%25``, ``%%`` and whole
triplets, and checks against ``urllib.parse.unquote_to_bytes`` (the reference decoder,
which reads a lone ``%`` as itself, as WHATWG's percent-decode does) that the form means
what was written, and that the form is its own form.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fak_core.grounding import GroundingStore, _canonical, canonical_value

TOKENS = ["%", "%2", "%4", "%25", "%%", "%41", "%34", "%31", "%7e", "%2F", "a", "4", "1", "F", "-"]
PIECES = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=6).map("".join)


def _path_and_query(form: str) -> tuple[bytes, bytes]:
    """The decoded bytes of a ``x.org`` form's path and query (the reference decoder)."""
    assert form.startswith("x.org"), form
    rest = form[len("x.org") :]
    path, _, query = rest.partition("?")
    return unquote_to_bytes(path), unquote_to_bytes(query)


@pytest.mark.fak_theorem("C4.6")
@settings(max_examples=80, deadline=None)
@given(path=PIECES, query=st.one_of(st.just(""), PIECES))
@example(path="%%341", query="")
@example(path="a", query="q=%%341")
@example(path="%%%34%31", query="")
@example(path="%", query="%2")
def test_a_lone_percent_is_itself_and_the_form_is_its_own_form(path: str, query: str) -> None:
    _canonical.cache_clear()  # a form the real code cached must not answer for a mutant
    written = "x.org/z" + path + ("?q=" + query if query else "")
    kind, form = canonical_value(written)
    assert kind == "url", (written, kind, form)
    assert _path_and_query(form) == _path_and_query(written), written
    assert canonical_value(form) == (kind, form), written
    store = GroundingStore()
    store.record_trusted("s", f"pay {written} today")
    assert store.grounded("s", form) is True
