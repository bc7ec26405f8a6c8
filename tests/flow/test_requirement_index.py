"""The shipped ``FileFetcher`` and the task's requirement index: one read per source, and the
index maps exactly the source identities (location, pinned revision) to what was read.

The oracles are this file's own: the requirement files' bytes and their SHA-256, and the
manifest's requirement entries (a source named twice, by two requirements, counts once).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from fak_core.flow import FileFetcher, Runner

from .test_freeze_edges import SHARED, _root


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.fak_theorem("F1.2")
def test_the_file_fetcher_reads_each_source_once_into_an_index_by_identity(
    tmp_path: Path,
) -> None:
    root = _root(tmp_path)
    fetcher = FileFetcher(root)
    runner = Runner(SHARED, fetcher, SHARED.digest)
    with pytest.raises(RuntimeError):
        runner.requirements  # noqa: B018 - nothing is materialised before the start
    assert fetcher.calls == 0
    runner.start()
    entries = SHARED.body["requirements"]
    locations = {e["location"] for e in entries}
    assert len(entries) > len(locations)  # one source is named twice
    assert fetcher.calls == len(locations)
    index = runner.requirements
    content = {loc: (root / loc).read_bytes() for loc in locations}
    identities = {(loc, _sha(data)) for loc, data in content.items()}
    assert len(index) == len(identities)
    assert set(iter(index)) == identities
    for loc, rev in identities:
        got = index[(loc, rev)]
        assert (got.location, got.revision, got.content) == (loc, rev, content[loc])
        assert got.identity == (loc, rev)
    for e in entries:
        named = index.named(e["name"])
        assert (named.name, named.identity) == (e["name"], (e["location"], e["revision"]))
    runner.start()  # a started runner does not start (nor read) again
    assert fetcher.calls == len(locations)
