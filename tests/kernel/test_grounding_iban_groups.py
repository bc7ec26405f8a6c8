"""IBANs written in groups (C4.6), against a brute-force reading of the theorem's rule: a
run of words is one IBAN when its first word (two letters, two digits, then letters or
digits) is under 15 characters, each later word has at most 4 letters or digits, each word
was taken while the text joined before it was under 34 characters, and the joined text
(15 to 34 characters) has an IBAN's shape; a whole word of that shape is one too. The
oracle tries every run of words (no loop that stops early), and also prices the text as
the theorem does (each distinct canonical form, the IBANs among them, costs its UTF-8
bytes plus 48), so an IBAN the store finds that no value can name shows in its bytes.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core.grounding import GroundingStore, _canonical

SHAPE = re.compile(r"[a-z]{2}[0-9]{2}[a-z0-9]{11,30}")
HEAD = re.compile(r"[a-z]{2}[0-9]{2}[a-z0-9]*")


def _ibans(words: list[str]) -> set[str]:
    found = {w for w in words if SHAPE.fullmatch(w)}
    for i, head in enumerate(words):
        if not (HEAD.fullmatch(head) and len(head) < 15):
            continue
        for end in range(i + 2, len(words) + 1):
            run = words[i:end]
            taken = all(
                len(w) <= 4 and w.isalnum() and len("".join(run[:k])) < 34
                for k, w in enumerate(run[1:], start=1)
            )
            joined = "".join(run)
            if taken and len(joined) >= 15 and SHAPE.fullmatch(joined):
                found.add(joined)
    return found


def _cost(words: list[str]) -> int:
    forms = set(words)
    padded = " " + " ".join(words) + " "
    priced = [*forms, *_ibans(words)]
    return len(padded.encode()) + sum(len(f.encode()) + 48 for f in priced) + 96 + 96 + 1


ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
group = st.one_of(
    st.text(st.sampled_from(ALNUM), min_size=1, max_size=6),
    st.sampled_from(["çé", "ñ1", "ö2"]),  # letters to isalnum, no IBAN's
)
head = st.builds(
    lambda a, d, rest: a + d + rest,
    st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=2, max_size=2),
    st.text(st.sampled_from("0123456789"), min_size=2, max_size=2),
    st.text(st.sampled_from(ALNUM), max_size=13),
)
texts = st.lists(st.one_of(head, group), min_size=1, max_size=12)

# at each edge of the rule: heads of 14 and 15 characters, groups of 4 and 5, joins of 15
# and 34 characters, a join that is 33 characters before its last group
EDGES = [
    ["no93", "8601", "1117", "947"],  # 15 in all
    ["no93", "8601", "1117", "94"],  # 14
    ["gb29nwbk601613", "3192", "6819"],  # a head of 14
    ["gb29nwbk6016133", "1926", "819"],  # a head of 15 (itself one)
    ["gb29", "nwbk6", "0161", "3319", "2681", "9"],  # a group of 5
    ["mt84", "malt", "0110", "0001", "2345", "mtlc", "ast0", "01s"],  # 31
    ["lc55", "hemm", "0001", "0001", "0012", "0012", "0002", "3015"],  # 32
    ["gb29n", "wbk6", "0161", "3319", "2681", "9abc", "defg", "hijk", "x"],  # 33, then 34
    ["gb29n", "wbk6", "0161", "3319", "2681", "9abc", "defg", "hijk", "xy"],  # 33, then 35
    ["gb29", "nwbk", "6016", "1331", "9268", "19ab", "cdef", "ghij", "kl", "m"],  # 34, 35
    ["gb2", "9nwb", "k601", "6133", "1926", "819"],  # the head is no head
    ["gb29", "nwbk", "çé60", "1613", "3192", "6819"],
]


def _check(words: list[str]) -> None:
    _canonical.cache_clear()  # a canonical form the real code cached must not answer
    store = GroundingStore(10**6, 10**6, 10**9)
    store.record_trusted("s", " ".join(words))
    assert store.stats()["grounding_bytes"] == _cost(words), words
    expected = _ibans(words)
    for i in range(len(words)):
        for end in range(i + 1, len(words) + 1):
            candidate = "".join(words[i:end])
            if SHAPE.fullmatch(candidate):
                assert store.grounded("s", candidate) == (candidate in expected), (words, i, end)


@pytest.mark.fak_theorem("C4.6")
@pytest.mark.parametrize("words", EDGES)
def test_an_iban_in_groups_is_read_at_the_edges_of_the_rule(words: list[str]) -> None:
    _check(words)


@pytest.mark.fak_theorem("C4.6")
@settings(max_examples=60, deadline=None)
@given(texts)
def test_ibans_in_groups_are_what_every_run_of_words_says(words: list[str]) -> None:
    _check(words)
