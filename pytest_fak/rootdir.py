"""Keep pytest's rootdir where it belongs when a ``fak`` option's value is a path.

pytest decides the rootdir and ini file (:func:`_pytest.config.findpaths.determine_setup`)
from the command line's free arguments *before* it loads plugins from entry points, so
it does not yet know that ``--fak-compare`` takes a value: in ``--fak-compare PATH`` (the
space form) the ``PATH`` is taken for a test path, and an existing file outside the
project moves the rootdir (and the ini file, ``addopts``, the conftest cut-off) there.
Once the plugin's options are known, :func:`repair` decides the setup again from the
real free arguments and, when it differs, puts the right one in place before any
conftest is loaded. Where that cannot be done (an ini file was found and applied at the
wrong place) it is a usage error naming the ``--fak-compare=PATH`` form, never a run
against the wrong rootdir. It sets the configuration's private fields pytest's own
``Config.parse`` sets (pytest 9; mypy checks they exist).
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import pytest

__all__ = ["PATH_OPTIONS", "repair"]

#: the plugin's options whose value is a path (the space form can move the rootdir)
PATH_OPTIONS = ("--fak-compare",)


def repair(config: pytest.Config, args: list[str]) -> None:
    """Re-decide the rootdir and ini file of ``config`` without the values of
    :data:`PATH_OPTIONS` (``args``: the command line, changed in place to carry the right
    ini file's ``addopts``)."""
    given = [o for o in PATH_OPTIONS if o in args]
    if not given:
        return
    from _pytest.config.findpaths import determine_setup

    ns = config.known_args_namespace
    setup: dict[str, Any] = {
        "inifile": ns.inifilename,
        "args": ns.file_or_dir,
        "rootdir_cmd_arg": ns.rootdir or None,
        "invocation_dir": config.invocation_params.dir,
    }
    if "override_ini" in inspect.signature(determine_setup).parameters:
        # pytest 9 folds the -o values into the ini values it returns (and names the ini
        # files it ignored); pytest 8 reads -o apart and returns three values
        setup["override_ini"] = ns.override_ini
    root, ini, cfg, *rest = determine_setup(**setup)
    ignored = rest[0] if rest else []
    if root == config.rootpath and ini == config.inipath:
        # the same ini file, found from another place: pytest names the others it ignores
        config._ignored_config_files = ignored
        return
    if config.inipath is not None:
        raise pytest.UsageError(
            f"{given[0]} PATH: pytest took PATH for a test path and read {config.inipath} "
            f"as the ini file (rootdir {config.rootpath}, not {root}): write {given[0]}=PATH "
            "(one argument), or pass --rootdir"
        )
    old_root = config.rootpath
    config._rootpath = root
    config._inipath = ini
    # the ini values: ``_inicfg`` since pytest 9, ``inicfg`` before
    setattr(config, "_inicfg" if hasattr(config, "_inicfg") else "inicfg", cfg)
    config._ignored_config_files = ignored
    config._inicache.clear()
    config._parser.extra_info["rootdir"] = str(root)
    config._parser.extra_info["inifile"] = str(ini)
    extra = [str(a) for a in config.getini("addopts")]
    if extra:
        # what pytest would have put before the arguments, had it found this ini file
        args[:] = extra + args
        config.pluginmanager.consider_preparse(extra, exclude_only=False)
        cut = ns.confcutdir
        ns = config._parser.parse_known_args(args, namespace=copy.copy(config.option))
        ns.confcutdir = ns.confcutdir or cut
        config.known_args_namespace = ns
    if ns.confcutdir == str(old_root):
        # pytest's default cut-off is the ini file's directory, else the rootdir
        ns.confcutdir = str(ini.parent if ini is not None else root)
