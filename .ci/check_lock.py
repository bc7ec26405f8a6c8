"""Check that the environment installed from a lock satisfies pyproject.toml's ranges.

``pip install --require-hashes -r requirements/dev.txt`` installs exactly the lock, and
``pip install --no-deps -e .`` does not look at the project's own requirements, so a range
edited in ``pyproject.toml`` without running ``.ci/lock`` again would go unnoticed. This
script reads every requirement of the project and of the extras it is given (following
``pytest-fak[...]`` self-references), and exits 1 naming each one the installed versions
do not satisfy: a missing package, or a version outside its range; otherwise it prints the
version installed of each.

    python .ci/check_lock.py dev
"""

from __future__ import annotations

import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def requirements(extras: list[str]) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name = project["name"]
    out = [Requirement(r) for r in project["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in project["optional-dependencies"][extra]:
            req = Requirement(text)
            if req.name == name:
                todo.extend(req.extras)
            else:
                out.append(req)
    return [r for r in out if r.marker is None or r.marker.evaluate()]


def main(extras: list[str]) -> int:
    problems, checked = [], []
    for req in requirements(extras):
        try:
            found = version(req.name)
        except PackageNotFoundError:
            problems.append(f"{req}: not installed")
            continue
        checked.append(f"{req.name} {found}")
        if not req.specifier.contains(found, prereleases=True):
            problems.append(f"{req}: the lock installed {req.name} {found}")
    for line in problems:
        print(f"check_lock: {line}", file=sys.stderr)
    if problems:
        print(
            "check_lock: the lock does not match pyproject.toml's ranges; regenerate it with "
            ".ci/lock (needs uv: python3 -m pip install uv)",
            file=sys.stderr,
        )
        return 1
    found = ", ".join(checked)
    print(f"check_lock: every requirement of pytest-fak[{','.join(extras)}] is satisfied: {found}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
