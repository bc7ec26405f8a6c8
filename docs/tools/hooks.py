"""MkDocs hooks of the docs site: the pages that live elsewhere in the repository, and links.

- The README is the site's home page (``index.md``); its links to ``docs/PAGE.md`` become
  links to ``PAGE.md``, and the pages' links to ``../README.md`` links to the home page.
- Every theorem document (``theorems/*.md``, and the bundled pack's under
  ``pytest_fak/pack/theorems/``) is a page under ``theorems/`` (``theorems/pack/``), each
  theorem heading with its id as its anchor (``theorems/taint.md#C4.6``).
- Every theorem id the pages mention outside code and links links to its theorem.
- ``options.md`` is ``pytest --help``'s and ``fak --help``'s text for pytest-fak, and
  ``theorem-format.md`` the docstring of ``pytest_fak.theorems`` (the syntax its parser
  enforces): the build generates both again and fails (a warning, under ``--strict``) when
  a committed page differs; ``python docs/tools/hooks.py`` rewrites them.

Nothing here changes a page's words: what the pages say is in ``docs/`` and the documents.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
THEOREM_DIRS = {"theorems": ROOT / "theorems", "theorems/pack": ROOT / "pytest_fak/pack/theorems"}
HEADING = re.compile(r"^## (?P<id>\S+) [\u2014\u2013-] .*$")
FENCE = re.compile(r"^\s*(```|~~~)")
# a theorem id standing alone: not part of a dotted name, a path, an anchor or a longer word
ID_IN_TEXT = re.compile(r"(?<![\w./#:-])([A-Z][A-Za-z]*\d+(?:[.\-][A-Za-z0-9]+)*)(?![\w-])")
# what is left alone: inline code spans, links and images, HTML comments and tags
LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)#\s]*)(?P<anchor>#[^)\s]*)?\)")
SKIP = re.compile(r"(`+)[^`]*?\1|!?\[[^\]]*\]\([^)]*\)|<!--.*?-->|<[^>]+>")

OPTIONS = ROOT / "docs" / "options.md"
FORMAT = ROOT / "docs" / "theorem-format.md"
log = logging.getLogger(f"mkdocs.plugins.{__name__}")

_theorems: dict[str, str] = {}  # theorem id -> the src_uri of its page


def _theorem_files() -> dict[str, Path]:
    out = {}
    for prefix, folder in THEOREM_DIRS.items():
        for path in sorted(folder.glob("*.md")):
            if path.name != "README.md":
                out[f"{prefix}/{path.name}"] = path
    return out


def _help(*argv: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV_CORE"))}
    env["COLUMNS"] = "100"
    with tempfile.TemporaryDirectory() as empty:  # no project's pytest configuration
        done = subprocess.run(
            [sys.executable, *argv], cwd=empty, env=env, capture_output=True, text=True, check=True
        )
    return done.stdout


def _pytest_sections(text: str) -> tuple[str, str]:
    """The ``fak`` option group and the ``fak_*`` ini options of ``pytest --help``."""
    lines = text.splitlines()
    start = lines.index("fak theorem proofs:")
    end = lines.index("", start)
    ini, keep = [], False
    for line in lines:
        if re.match(r"^  \S", line):  # a new ini option (or the end of the list)
            keep = line.startswith("  fak_")
        elif not line.startswith("    "):
            keep = False
        if keep:
            ini.append(line)
    if not ini:
        raise RuntimeError("pytest --help lists no fak_* ini option: is pytest-fak installed?")
    return "\n".join(lines[start + 1 : end]), "\n".join(ini)


def options_page() -> str:
    """The text ``docs/options.md`` must have."""
    options, ini = _pytest_sections(_help("-m", "pytest", "--help"))
    cli = _help("-m", "fak_core.cli", "--help")
    block = "```text\n{}\n```"
    return (
        "\n\n".join(
            [
                "# Options",
                "`pytest --help` and `fak --help` for pytest-fak, written by"
                " `python docs/tools/hooks.py`; the docs build fails while this page differs from"
                " them. What each option does in detail: the pages"
                " [Prove your own adjudicators](plugin.md), [Partial runs, errors and what CI"
                " reads](reports.md) and [Generated mutants](mutants.md).",
                "## pytest options (`fak theorem proofs`)",
                block.format(options),
                "## ini options (`[pytest]`, `[tool.pytest.ini_options]`)",
                block.format(ini),
                "## The `fak` command",
                block.format(cli.rstrip("\n")),
            ]
        )
        + "\n"
    )


def format_page() -> str:
    """The text ``docs/theorem-format.md`` must have: the parser's docstring as Markdown
    (its ``::`` literal block fenced, reST's double backquotes and roles as code)."""
    import pytest_fak.theorems

    doc = (pytest_fak.theorems.__doc__ or "").strip("\n").splitlines()
    out = [
        "# Theorem documents",
        "",
        "The syntax `pytest --fak-theorems` reads in `theorems/*.md` (the docstring of"
        " `pytest_fak.theorems`, whose parser enforces it; an example project: the README's"
        " walk-through).",
        "",
    ]
    block = False
    for line in doc[2:]:  # the docstring's first line names the module's job, not the format
        if block and line and not line.startswith("    "):
            while out[-1] == "":
                out.pop()
            out.extend(["```", ""])
            block = False
        if block:
            out.append(line[4:].replace("``", "`"))
            continue
        line = re.sub(r":\w+:`([^`]+)`", r"`\1`", line.replace("``", "`"))
        if line.endswith("::"):
            out.extend([line[:-1], "", "```markdown"])
            block = True
        else:
            out.append(line)
    if block:
        out.append("```")
    return "\n".join(out).replace("```markdown\n\n", "```markdown\n") + "\n"


GENERATED = {OPTIONS: options_page, FORMAT: format_page}


def on_files(files: Files, config: Any) -> Files:
    readme = (ROOT / "README.md").read_text("utf-8")
    files.append(File.generated(config, "index.md", content=readme))
    for uri, path in _theorem_files().items():
        text = path.read_text("utf-8")
        for line in text.splitlines():
            match = HEADING.match(line)
            if match:
                _theorems[match["id"]] = uri
        files.append(File.generated(config, uri, content=text))
    for path, make in GENERATED.items():
        if not path.is_file() or path.read_text("utf-8") != make():
            log.warning(f"docs/{path.name} is out of date: run python docs/tools/hooks.py")
    return files


def _outside(match: re.Match[str], files: Files) -> str:
    """A README link to a file of the repository outside the site, as its text alone."""
    target = match["target"]
    if "://" in target or target.startswith("#") or files.get_file_from_path(target):
        return match[0]
    return match["text"]


def _link_ids(text: str, here: str) -> str:
    def link(match: re.Match[str]) -> str:
        uri = _theorems.get(match[1])
        if uri is None:
            return match[0]
        target = posixpath.relpath(uri, posixpath.dirname(here) or ".")
        return f"[{match[1]}]({target}#{match[1]})"

    out, last = [], 0
    for skip in SKIP.finditer(text):
        out.append(ID_IN_TEXT.sub(link, text[last : skip.start()]))
        out.append(skip[0])
        last = skip.end()
    out.append(ID_IN_TEXT.sub(link, text[last:]))
    return "".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    here = page.file.src_uri
    if here == "index.md":
        markdown = re.sub(r"\]\(docs/", "](", markdown)
        markdown = LINK.sub(lambda m: _outside(m, files), markdown)
    else:
        markdown = re.sub(r"\]\(\.\./README\.md", "](index.md", markdown)
    theorem_page = here in _theorem_files()
    out: list[str] = []
    fenced = False
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            heading = HEADING.match(line)
            if theorem_page and heading:
                line = f"{line} {{#{heading['id']}}}"
            elif not line.startswith("#"):
                line = _link_ids(line, here)
            after_text = out and out[-1].strip() and not out[-1].startswith(("- ", " "))
            if theorem_page and line.startswith("- ") and after_text:
                out.append("")  # Markdown starts a list only after a blank line
        out.append(line)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    for path, make in GENERATED.items():
        path.write_text(make(), "utf-8")
        print(f"wrote {path}")
