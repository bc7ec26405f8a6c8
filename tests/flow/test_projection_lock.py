"""The projection shows each reference as the lock entry it resolves to, or refuses (F1.4).

Built from the example's frozen manifest: every node reference shows the lock's exact
version and digest (looked up here by hand in the lock), and a node naming a reference the
lock does not hold, of any kind, makes the projection refuse with ``ManifestError``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fak_core.flow import Manifest, ManifestError
from fak_core.flow.projection import project

from .test_runner import GOOD


def _locked(kind: str, text: str) -> dict[str, str]:
    name, _, selector = text.partition("@")
    hits = [
        e
        for e in GOOD.body["lock"]
        if e["kind"] == kind and e["name"] == name and selector in (e["version"], e["digest"])
    ]
    assert len(hits) == 1, (kind, text)
    return {"name": name, "version": hits[0]["version"], "digest": hits[0]["digest"]}


@pytest.mark.fak_theorem("F1.4")
def test_each_reference_shows_its_locked_version_and_digest() -> None:
    view = project(GOOD)
    for node, shown in zip(GOOD.body["nodes"], view["nodes"], strict=True):
        for field, kind in (("skills", "skill"), ("extensions", "extension"), ("tools", "tool")):
            assert shown[field] == [_locked(kind, t) for t in node[field]], (node["id"], field)


def _with_ref(field: str, text: str) -> Manifest:
    body: dict[str, Any] = copy.deepcopy(GOOD.body)
    body["nodes"][0][field].append(text)
    return Manifest.seal(body)


@pytest.mark.fak_theorem("F1.4")
@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("skills", "planning@9.9.9"),
        ("tools", "read_file@1.2.1"),
        ("extensions", "issue-tracker@3.1.0-rc.1"),
        ("tools", "read_file"),
        ("skills", "read_file@1.2.0"),  # a tool's version, named as a skill
    ],
)
def test_a_reference_the_lock_does_not_hold_is_refused(field: str, text: str) -> None:
    with pytest.raises(ManifestError, match="is not in the capability lock"):
        project(_with_ref(field, text))
