"""Split the long README (before issue 31) into the reference pages of ``docs/``.

The reference once lived in ``README.md``; it now lives in ``docs/``, page by page. While
branches written against the long README are still being merged, their edits to its facts
are carried over by running this script on their README: it cuts the text at the same
headings and paragraph openings, moves every piece unchanged to its page (only heading
levels, in-page links and links to files outside the site change), and writes the pages.

    python docs/tools/readme_split.py OLD_README.md [--out DIR]   (default: docs)

To carry a branch's README edits over, split its README and the one it started from, and
apply the difference to the pages:

    t=$(mktemp -d) && mkdir "$t/a" "$t/b" && split=docs/tools/readme_split.py
    git show "$(git merge-base HEAD BRANCH)":README.md | python $split - --out "$t/a"
    git show BRANCH:README.md | python $split - --out "$t/b"
    (cd "$t" && diff -ru a b) | patch -p1 -d docs

A heading or an opening this script cuts at that the README no longer has is an error
naming it: move that edit by hand. ``MAPPING`` below is the table of which README section
went to which page.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Piece:
    """README text from the line ``start`` up to (not including) the line ``end``."""

    start: str  # how the piece's first line starts (a heading or a paragraph opening)
    end: str  # how the first line after it starts ("" for the end of the README)
    keep_start: bool = True  # False: the start line (a heading) is replaced by ``heading``
    heading: str = ""  # a heading put before the piece on its page ("" for none)


@dataclass(frozen=True)
class Page:
    """A docs page: its file name, its title and the README pieces it holds, in order."""

    name: str
    title: str
    pieces: tuple[Piece, ...]
    intro: str = ""  # text of the page's own before the first piece (navigation only)


MAPPING: tuple[Page, ...] = (
    Page(
        "proofs.md",
        "The proof ledger",
        (
            Piece(
                "The proof ledger: ",
                "## The kernel",
            ),
        ),
        intro=(
            "Command 1 is the proof run of the README's [two commands]"
            "(../README.md#the-two-commands); the theorems it proves are the documents in "
            "`theorems/`, each a page of this site (Theorems)."
        ),
    ),
    Page(
        "kernel.md",
        "The kernel",
        (Piece("## The kernel", "## The gateway", keep_start=False),),
    ),
    Page(
        "gateway.md",
        "The gateway",
        (
            Piece(
                "## The gateway",
                "### The MCP proxy and an untrusted downstream server",
                keep_start=False,
            ),
            Piece(
                "Limits, each refused with an error that names it:",
                "### Sessions belong to someone",
                heading="## Limits",
            ),
        ),
    ),
    Page(
        "mcp-proxy.md",
        "The MCP proxy and an untrusted downstream server",
        (
            Piece(
                "### The MCP proxy and an untrusted downstream server",
                "Limits, each refused with an error that names it:",
                keep_start=False,
            ),
        ),
    ),
    Page(
        "sessions.md",
        "Sessions and shared state",
        (
            Piece(
                "### Sessions belong to someone",
                "### Several replicas, one session state (`--state`, `--workers`)",
            ),
            Piece(
                "### Several replicas, one session state (`--state`, `--workers`)",
                "## Policy v2: declared sinks, grounded destinations, approvals",
            ),
        ),
    ),
    Page(
        "policy.md",
        "Policy v2: declared sinks, grounded destinations, approvals",
        (
            Piece(
                "## Policy v2: declared sinks, grounded destinations, approvals",
                "A declaration may also name **identifiers**: ",
                keep_start=False,
            ),
            Piece(
                "A declaration may also name **identifiers**: ",
                "AgentDojo v1.2.2 (97 user tasks, 949 pairs)",
                heading="## Identifiers and confidential values",
            ),
            Piece(
                "AgentDojo v1.2.2 (97 user tasks, 949 pairs)",
                "## The result screen",
                heading="## AgentDojo",
            ),
        ),
        intro="Policy files in general (`fak-policy/v1`, hosts, guards): [The kernel](kernel.md).",
    ),
    Page(
        "screen.md",
        "The result screen",
        (Piece("## The result screen", "## Plan preflight and freezing", keep_start=False),),
    ),
    Page(
        "flows.md",
        "Plan preflight and freezing",
        (
            Piece(
                "## Plan preflight and freezing", "## Prove your own adjudicators", keep_start=False
            ),
        ),
    ),
    Page(
        "plugin.md",
        "Prove your own adjudicators",
        (
            Piece("```sh", "### Partial runs, errors and what CI reads"),
            Piece("### Mutants and fixtures", "### Coverage"),
            Piece("### Coverage", "### Generated mutants (`--fak-mutate`)"),
        ),
        intro=(
            "What to install: the README's [Install](../README.md#install) section; a first "
            "project, step by step: its [walk-through]"
            "(../README.md#prove-your-own-adjudicator-in-10-minutes)."
        ),
    ),
    Page(
        "reports.md",
        "Partial runs, errors and what CI reads",
        (
            Piece(
                "### Partial runs, errors and what CI reads",
                "### Mutants and fixtures",
                keep_start=False,
            ),
        ),
    ),
    Page(
        "mutants.md",
        "Generated mutants (`--fak-mutate`)",
        (
            Piece(
                "### Generated mutants (`--fak-mutate`)",
                "A mutant goes into the function object ",
                keep_start=False,
            ),
            Piece(
                "A mutant goes into the function object ",
                "A mutant can also blow up the process. ",
                heading="## Where a mutant goes",
            ),
            Piece(
                "A mutant can also blow up the process. ",
                "With the phase on, PROVEN also requires ",
                heading="## Memory and crashes",
            ),
            Piece(
                "With the phase on, PROVEN also requires ",
                "A survivor makes the theorem VACUOUS ",
                heading="## Waivers",
            ),
            Piece(
                "A survivor makes the theorem VACUOUS ",
                "A full re-mutation scales out ",
                heading="## Survivors and the cache",
            ),
            Piece(
                "A full re-mutation scales out ",
                "This project commits its",
                heading="## Shards",
            ),
            Piece(
                "This project commits its", "## Dependencies", heading="## This project's figures"
            ),
        ),
    ),
    Page(
        "dependencies.md",
        "Dependencies",
        (Piece("## Dependencies", "## Benchmarks", keep_start=False),),
    ),
    Page(
        "benchmarks.md",
        "Benchmarks",
        (Piece("## Benchmarks", "", keep_start=False),),
    ),
)

# Links of the long README that point into itself or at files outside the site.
LINKS = {
    "[The result screen](#the-result-screen)": "[The result screen](screen.md)",
    "[Dependencies](#dependencies)": "[Dependencies](dependencies.md)",
    "**see [`proofs/PROOFS.md`](proofs/PROOFS.md)**": "**see `proofs/PROOFS.md`**",
}


class SplitError(Exception):
    """The README does not have a heading or opening the mapping cuts at."""


def _index(lines: list[str], line: str, after: int) -> int:
    if line == "":
        return len(lines)
    for i in range(after, len(lines)):
        if lines[i].startswith(line):
            return i
    raise SplitError(f"README has no line {line!r} after line {after + 1}: move that edit by hand")


def _piece_text(lines: list[str], piece: Piece, page: Page) -> str:
    # "```sh" opens several blocks: the plugin page's is the first after its heading
    anchor = _index(lines, "## Prove your own adjudicators", 0) if piece.start == "```sh" else 0
    start = _index(lines, piece.start, anchor)
    end = _index(lines, piece.end, start + 1)
    body = lines[start:end] if piece.keep_start else lines[start + 1 : end]
    if piece.keep_start and body and body[0].startswith("###"):
        body = [body[0][1:], *body[1:]]  # a README subsection is a section of its page
    text = "\n".join(body).strip("\n")
    for old, new in LINKS.items():
        text = text.replace(old, new)
    if piece.heading:
        text = f"{piece.heading}\n\n{text}"
    return text


def split(readme: str) -> dict[str, str]:
    """The pages' texts by file name."""
    lines = readme.splitlines()
    pages = {}
    for page in MAPPING:
        parts = [f"# {page.title}"]
        if page.intro:
            parts.append(page.intro)
        parts.extend(_piece_text(lines, piece, page) for piece in page.pieces)
        pages[page.name] = "\n\n".join(parts) + "\n"
    return pages


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("readme", help="the long README ('-' for standard input)")
    parser.add_argument("--out", default="docs", help="where the pages go (default: docs)")
    args = parser.parse_args(argv)
    text = sys.stdin.read() if args.readme == "-" else Path(args.readme).read_text("utf-8")
    try:
        pages = split(text)
    except SplitError as exc:
        print(f"readme_split: {exc}", file=sys.stderr)
        return 1
    out = Path(args.out)
    for name, body in pages.items():
        (out / name).write_text(body, "utf-8")
        print(f"{out / name}: {body.count(chr(10))} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
