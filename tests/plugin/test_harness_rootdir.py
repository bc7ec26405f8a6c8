"""H1.5: a path given to ``--fak-compare`` in either option form leaves pytest's rootdir and
ini file where the command line without it puts them (a real pytest configuration is
parsed in this process, from a project written to disk)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from _pytest.config import get_config
from hypothesis import example, given, settings
from hypothesis import strategies as st

INIS = {
    # addopts that show whether they were applied: a plugin loaded, one blocked, an option
    "pytest.ini": "[pytest]\naddopts = -p no:schemathesis -p pytester --fak-report-dir=ini\n",
    "tox.ini": "[pytest]\n",
    "pyproject.toml": "[tool.pytest.ini_options]\n",
    "setup.cfg": "[tool:pytest]\n",
}
BASE = [
    "--assert=plain",
    "--capture=no",
    "-p",
    "no:faulthandler",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:randomly",
]


def _setup(cwd: Path, args: list[str]) -> dict[str, object] | str:
    """What pytest settled on for ``args`` run in ``cwd`` (or the usage error it stopped
    with): the rootdir, the ini file and the files it ignored, what the header shows, the
    ini's addopts applied (early and late), the conftest cut-off."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        config = get_config([*BASE, *args])
        try:
            config.parse([*BASE, *args])
        except pytest.UsageError as exc:
            return str(exc)
        finally:
            config._ensure_unconfigure()
        early = config.known_args_namespace
        return {
            "rootdir": config.rootpath,
            "inifile": config.inipath,
            "ignored": list(getattr(config, "_ignored_config_files", [])),  # pytest 9
            "python_files": config.getini("python_files"),  # an -o value kept
            "header": dict(config._parser.extra_info),
            "report_dir": (config.getoption("fak_report_dir"), early.fak_report_dir),
            "plugins": (
                config.pluginmanager.has_plugin("pytester"),
                config.pluginmanager.is_blocked("schemathesis"),
            ),
            "confcutdir": early.confcutdir,
        }
    finally:
        os.chdir(old)


#: the project's ini files, each variant tried in every example
VARIANTS = [(), ("pytest.ini",), ("pytest.ini", "tox.ini"), ("tox.ini",), ("pyproject.toml",)]
VARIANTS += [("setup.cfg",)]


@pytest.mark.fak_theorem("H1.5")
@settings(max_examples=12, deadline=None)
@given(
    where=st.sampled_from(["outside", "inside", "sibling"]),
    depth=st.integers(0, 2),
    relative=st.booleans(),
    outside_ini=st.sampled_from([None, *INIS]),
    test_arg=st.sampled_from([None, "tests", "tests/test_x.py"]),
    name=st.from_regex(r"[a-z][a-z0-9_-]{0,8}\.json", fullmatch=True),
    rootdir=st.booleans(),  # --rootdir given (the tests folder): it stays the rootdir
    override=st.booleans(),  # an ini value given with -o: the repaired setup keeps it
)
# the space form moved the rootdir (no ini file read): the repaired setup keeps the -o value
@example(
    where="outside",
    depth=0,
    relative=False,
    outside_ini=None,
    test_arg=None,
    name="prev.json",
    rootdir=False,
    override=True,
)
# an ini file beside the compared file, read as the project's: the usage error
@example(
    where="outside",
    depth=0,
    relative=False,
    outside_ini="pytest.ini",
    test_arg=None,
    name="prev.json",
    rootdir=False,
    override=False,
)
# --rootdir given: the repaired setup keeps it
@example(
    where="sibling",
    depth=1,
    relative=True,
    outside_ini=None,
    test_arg=None,
    name="p.json",
    rootdir=True,
    override=False,
)
def test_a_compare_path_in_either_form_keeps_the_rootdir_and_ini_file(
    where: str,
    depth: int,
    relative: bool,
    outside_ini: str | None,
    test_arg: str | None,
    name: str,
    rootdir: bool,
    override: bool,
) -> None:
    for inis in VARIANTS:
        _check(inis, where, depth, relative, outside_ini, test_arg, name, rootdir, override)


def _check(
    inis: tuple[str, ...],
    where: str,
    depth: int,
    relative: bool,
    outside_ini: str | None,
    test_arg: str | None,
    name: str,
    rootdir: bool = False,
    override: bool = False,
) -> None:
    top = Path(tempfile.mkdtemp(prefix="fak-rootdir-")).resolve()
    project = top / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    for ini in inis:  # with two, pytest reads the first and ignores the other
        (project / ini).write_text(INIS[ini])
    base = {"outside": top / "artifacts", "inside": project, "sibling": top}[where]
    folder = base.joinpath(*[f"d{i}" for i in range(depth)])
    folder.mkdir(parents=True, exist_ok=True)
    if outside_ini is not None and where == "outside":
        (top / "artifacts" / outside_ini).write_text(INIS[outside_ini])
    artifact = folder / name
    artifact.write_text("{}")
    path = os.path.relpath(artifact, project) if relative else str(artifact)
    tests = [test_arg] if test_arg else []
    if rootdir:
        tests.append(f"--rootdir={project / 'tests'}")
    if override:
        tests += ["-o", "python_files=check_*.py"]
    without = _setup(project, tests)
    assert not isinstance(without, str), without
    equals = _setup(project, [*tests, f"--fak-compare={path}"])
    assert equals == without  # one argument: pytest never takes it for a test path
    space = _setup(project, [*tests, "--fak-compare", path])
    if isinstance(space, str):
        # only an ini file found beside the artifact (read before the plugin could tell)
        # stops the run, and the error says how to write it
        assert outside_ini is not None and where == "outside", space
        assert "--fak-compare=PATH" in space
    else:
        assert space == without
