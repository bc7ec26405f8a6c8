"""C1.2 (a journal is one replica's chain) for ``fak serve --workers``: each worker's file.

With more than one worker, ``--journal DIR/j.db`` is written by the worker of replica R to
``DIR/j-R.db`` (the replica id before the last suffix, as the README states); with one
worker, to the path given. The expected paths are built here by joining the parts the
test chose, never through ``pathlib``'s reading of the name.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fak_core.gateway.replicas import journal_path_for

#: (path, replica, the path each of several workers writes), written out by hand.
NAMED = (
    ("j.db", "A", "j-A.db"),
    ("/var/lib/fak/j.db", "host-1", "/var/lib/fak/j-host-1.db"),
    ("audit.old.sqlite", "r", "audit.old-r.sqlite"),
    ("journal", "B", "journal-B"),
    ("d/é.db", "ü", "d/é-ü.db"),
)

# a name part: no separator, no dot (dots are placed by the test), never empty
part = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/.\x00"),
    min_size=1,
    max_size=8,
)
replica = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), max_size=8
)


@pytest.mark.fak_theorem("C1.2")
@pytest.mark.parametrize(("path", "rid", "forked"), NAMED)
def test_each_worker_writes_its_replicas_file(path: str, rid: str, forked: str) -> None:
    for workers in (2, 3, 8):
        assert journal_path_for(path, rid, workers) == forked
    assert journal_path_for(path, rid, 1) == path


@pytest.mark.fak_theorem("C1.2")
@settings(max_examples=60, deadline=None)
@given(
    folder=st.sampled_from(("", "d/", "/tmp/x/")),
    parts=st.lists(part, min_size=1, max_size=3),
    rid=replica,
    workers=st.integers(1, 4),
)
@example(folder="", parts=["j", "db"], rid="R", workers=2)
@example(folder="", parts=["j", "db"], rid="R", workers=1)
def test_the_replica_id_goes_before_the_suffix(
    folder: str, parts: list[str], rid: str, workers: int
) -> None:
    # the name's parts joined by dots: the suffix is the last part after a dot, if any
    path = folder + ".".join(parts)
    got = journal_path_for(path, rid, workers)
    if workers == 1:
        assert got == path
    elif len(parts) == 1:
        assert got == f"{path}-{rid}"
    else:
        assert got == f"{folder}{'.'.join(parts[:-1])}-{rid}.{parts[-1]}"
