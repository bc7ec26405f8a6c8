"""A runner given a ``Manifest`` object checks it as a manifest file is checked (F1.2).

``Runner`` takes the mounted manifest as bytes or as an already built ``Manifest``; the
second must be refused for every reason the first is (another ``format``, a body that is
not an object, a digest that is not a string, a body with no canonical form) with a
``ManifestError`` that is not a ``RunnerRefused``, before any revalidation. The expected
outcomes are written by hand from the theorem.
"""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fak_core.flow import FileFetcher, Manifest, ManifestError, Runner, RunnerRefused
from fak_core.flow.canonical import digest

from .flowdata import EXAMPLE
from .test_runner import GOOD


def _resealed(edit: Callable[[dict[str, Any]], None]) -> Manifest:
    body = copy.deepcopy(GOOD.body)
    edit(body)
    return Manifest(body, digest(body))


def _bad_objects() -> list[tuple[str, Manifest, str]]:
    other = _resealed(lambda b: b.update(format="fak-flow-manifest/v2"))
    dropped = _resealed(lambda b: b.pop("format"))
    return [
        ("another format, resealed", other, "manifest.format"),
        ("no format, resealed", dropped, "manifest.format"),
        ("format under the good digest", Manifest(other.body, GOOD.digest), "manifest.format"),
        ("a body that is a list", Manifest([GOOD.body], GOOD.digest), "must be an object"),  # type: ignore[arg-type]
        ("a digest that is a number", Manifest(GOOD.body, 7), "digest a string"),  # type: ignore[arg-type]
    ]


BAD = _bad_objects()


@pytest.mark.fak_theorem("F1.2")
@pytest.mark.parametrize(("label", "manifest", "problem"), BAD, ids=[b[0] for b in BAD])
def test_a_manifest_object_is_checked_like_a_file(
    label: str, manifest: Manifest, problem: str
) -> None:
    fetcher = FileFetcher(EXAMPLE)
    runner = Runner(manifest, fetcher, GOOD.digest)
    with pytest.raises(ManifestError) as info:
        runner.start()
    assert not isinstance(info.value, RunnerRefused), label
    assert str(info.value).startswith("mounted: ") and problem in str(info.value), label
    assert runner.manifest is None and fetcher.calls == 0, label


@pytest.mark.fak_theorem("F1.2")
def test_a_manifest_object_with_no_canonical_form_is_uncanonical() -> None:
    body = copy.deepcopy(GOOD.body)
    body["policy"]["budget"]["max_tokens"] = float("nan")
    fetcher = FileFetcher(EXAMPLE)
    with pytest.raises(RunnerRefused, match=r"^refusing to start: UNCANONICAL at manifest$"):
        Runner(Manifest(body, GOOD.digest), fetcher).start()
    assert fetcher.calls == 0


@pytest.mark.fak_theorem("F1.2")
def test_the_untouched_manifest_object_starts_as_its_file_does() -> None:
    for raw in (Manifest(copy.deepcopy(GOOD.body), GOOD.digest), GOOD.to_json().encode()):
        started = Runner(raw, FileFetcher(EXAMPLE), GOOD.digest).start()
        assert (started.body, started.digest) == (
            json.loads(GOOD.to_json())["manifest"],
            GOOD.digest,
        )


@pytest.mark.fak_theorem("F1.2")
@pytest.mark.parametrize("name", ["plain.md", "pro duct%41?#.md", "ünï.md"])
def test_a_location_names_its_file_however_it_is_spelled(name: str) -> None:
    """A requirement location is a ``file://`` URI (percent-decoded), an absolute path or a
    path relative to the workspace's directory; each spelling fetches the same file."""
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "ws"
        (root / "req").mkdir(parents=True)
        target = root / "req" / name
        target.write_bytes(name.encode() + b" content")
        (Path(d) / name).write_bytes(b"a file of the same name beside the workspace")
        spellings = [
            f"req/{name}",
            str(target),
            target.as_uri(),
            "file://" + urllib.parse.quote(str(target)),
        ]
        for location in spellings:
            assert FileFetcher(root).fetch(location) == name.encode() + b" content", location
        with contextlib.chdir(root / "req"):  # relative to the workspace, not the cwd
            assert FileFetcher(root).fetch(f"req/{name}") == name.encode() + b" content"
        with pytest.raises(FileNotFoundError):
            FileFetcher(root).fetch(f"file://{root}/req/absent.md")
