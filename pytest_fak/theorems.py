"""Theorem documents: the strict Markdown syntax, its parser, and the loaded index.

One file per module under a theorems directory. Text before the first ``##`` heading is
free prose, except an optional ``**MUTANT-MODULES.**`` list naming modules that define
the document's mutants. Each theorem is one section::

    ## A7.1 — cheapest-first

    **THEOREM.** Rungs run in ascending declared cost.

    **REGIME.** A

    **PROOF.** `fak_core.preflight:Ladder.add_rung` keeps the rungs sorted by cost ...

    **ANCHORS.**
    - `fak_core.preflight:Ladder.adjudicate`

    **MUTANTS.**
    - `reversed-rungs` — evaluate the rungs most expensive first

    **CAVEATS.**
    - Costs are declared, not measured.

    **SCOPED-OUT.** (optional) why no witness is expected here

    **EQUIVALENT-MUTANTS.** (optional) generated mutants that cannot change behaviour
    - `pkg.mod:f/constant/1a2b3c4d` — why (checked when ``--fak-mutate`` is on)

    **DEPENDS-ON.** (optional) files the verdict depends on, relative to the project root
    - `policies/default.json` — the policy the theorem is about (``fak proofs check``
      reports the verdict STALE when one changes)

Every ``##`` heading is a theorem heading ``## <ID> — <title>``. THEOREM, REGIME, PROOF
and CAVEATS are required; ANCHORS and MUTANTS need at least one bullet unless the
theorem is SCOPED-OUT. Each label appears once. WITNESS and VERDICT are computed by the
plugin and refused here. Symbols in backticks (``module:Qual.name``) anywhere in PROOF
and ANCHORS must resolve; a ``file.py:123`` citation is refused. Every problem is a
:class:`TheoremError` carrying file, line and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_fak.symbols import SYMBOL_RE, SymbolError, resolve, source_hash

__all__ = [
    "ID_RE",
    "MUTANT_RE",
    "REGIMES",
    "Anchor",
    "MutantDecl",
    "Theorem",
    "Waiver",
    "TheoremError",
    "TheoremIndex",
    "load_theorems",
    "parse_document",
]

ID_RE = re.compile(r"^[A-Z][A-Za-z0-9]*(?:[.\-][A-Za-z0-9]+)*$")
MUTANT_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
REGIMES = {
    "N": "numerical",
    "A": "structural",
    "C": "integrity",
    "D": "decision procedure",
}
_DASHES = "[\u2014\u2013-]"  # em dash, en dash or hyphen
_HEADING = re.compile(r"^##\s+(?P<id>\S+)\s+" + _DASHES + r"\s+(?P<title>\S.*?)\s*$")
_LABEL = re.compile(r"^\*\*(?P<label>[A-Z][A-Z-]*)\.\*\*(?:\s+(?P<rest>.*?))?\s*$")
_BULLET = re.compile(r"^- (?P<body>.*\S)\s*$")
_CODE_BULLET = re.compile(r"^`(?P<code>[^`]+)`(?:\s+" + _DASHES + r"\s+(?P<note>\S.*))?$")
_FILE_LINE = re.compile(r"\b[\w/.-]+\.py:\d+\b")
_SYMBOL_IN_TEXT = re.compile(r"`([^`\s]+:[^`\s]+)`")
_TEXT_FIELDS = ("THEOREM", "REGIME", "PROOF", "SCOPED-OUT")
_LIST_FIELDS = ("ANCHORS", "MUTANTS", "CAVEATS", "EQUIVALENT-MUTANTS", "DEPENDS-ON")
_COMPUTED = ("WITNESS", "VERDICT", "DOS", "DATE")
_REQUIRED = ("THEOREM", "REGIME", "PROOF", "CAVEATS")


class TheoremError(ValueError):
    """A malformed theorem document; ``str()`` is ``file:line: problem; fix``."""

    def __init__(self, path: str | Path, line: int, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.message = message
        super().__init__(f"{self.path}:{line}: {message}")


@dataclass(frozen=True, slots=True)
class Anchor:
    """A symbol a passing witness must execute, with where it is declared."""

    symbol: str
    line: int
    filename: str = ""
    lines: frozenset[int] = frozenset()
    sha256: str = ""


@dataclass(frozen=True, slots=True)
class MutantDecl:
    """A declared mutant: ``<theorem id>/<name>`` and what breakage it stands for."""

    theorem_id: str
    name: str
    description: str
    line: int

    @property
    def id(self) -> str:
        return f"{self.theorem_id}/{self.name}"


@dataclass(frozen=True, slots=True)
class Waiver:
    """A generated mutant the document declares equivalent to the code, with the reason."""

    mutant_id: str
    reason: str
    line: int


@dataclass(frozen=True, slots=True)
class Theorem:
    """One parsed theorem section."""

    id: str
    title: str
    path: str
    line: int
    statement: str
    regime: str
    proof: str
    anchors: tuple[Anchor, ...]
    mutants: tuple[MutantDecl, ...]
    caveats: tuple[str, ...]
    scoped_out: str | None
    text: str
    mutant_modules: tuple[str, ...] = ()
    equivalent: tuple[Waiver, ...] = ()
    #: files (relative to the project root) the verdict depends on: **DEPENDS-ON.**
    depends_on: tuple[str, ...] = ()

    @property
    def text_sha256(self) -> str:
        return source_hash(self.text)


@dataclass
class _Section:
    id: str
    title: str
    line: int
    lines: list[tuple[int, str]] = field(default_factory=list)


def _split_fields(
    path: str, section: _Section
) -> dict[str, tuple[int, str, list[tuple[int, str]]]]:
    fields: dict[str, tuple[int, str, list[tuple[int, str]]]] = {}
    current: str | None = None
    for lineno, raw in section.lines:
        m = _LABEL.match(raw)
        if m:
            label = m.group("label")
            if label in _COMPUTED:
                raise TheoremError(
                    path,
                    lineno,
                    f"**{label}.** is computed by the plugin, not written by hand; remove it "
                    "(the report gives the witness command and the dated verdict)",
                )
            if label not in _TEXT_FIELDS + _LIST_FIELDS:
                known = ", ".join(f"**{x}.**" for x in _TEXT_FIELDS + _LIST_FIELDS)
                raise TheoremError(
                    path, lineno, f"unknown field **{label}.**; the fields are {known}"
                )
            if label in fields:
                raise TheoremError(
                    path,
                    lineno,
                    f"**{label}.** appears twice in {section.id} (first at line "
                    f"{fields[label][0]}); merge them",
                )
            fields[label] = (lineno, m.group("rest") or "", [])
            current = label
            continue
        if current is None:
            if raw.strip():
                raise TheoremError(
                    path,
                    lineno,
                    f"text before the first field of {section.id}; start it with **THEOREM.**",
                )
            continue
        fields[current][2].append((lineno, raw))
    return fields


def _prose(inline: str, body: list[tuple[int, str]]) -> str:
    parts = [inline] if inline else []
    parts += [raw.strip() for _, raw in body]
    return "\n".join(parts).strip()


def _bullets(
    path: str, label: str, line: int, inline: str, body: list[tuple[int, str]]
) -> list[tuple[int, str]]:
    if inline:
        raise TheoremError(
            path, line, f"**{label}.** takes a bullet list on the following lines, not inline text"
        )
    items: list[tuple[int, str]] = []
    for lineno, raw in body:
        if not raw.strip():
            continue
        m = _BULLET.match(raw)
        if m:
            items.append((lineno, m.group("body")))
        elif raw.startswith("  ") and items:
            items[-1] = (items[-1][0], items[-1][1] + " " + raw.strip())
        else:
            raise TheoremError(
                path,
                lineno,
                f"**{label}.** holds only '- ' bullets (indent a continuation line by two spaces)",
            )
    return items


def _check_symbols(path: str, line: int, text: str) -> None:
    for lineno_offset, chunk in enumerate(text.split("\n")):
        bad = _FILE_LINE.search(chunk)
        if bad:
            raise TheoremError(
                path,
                line + lineno_offset,
                f"cites code by file:line ({bad.group(0)}); "
                "cite it by symbol instead, e.g. `fak_core.preflight:Ladder.check`",
            )
        for sym in _SYMBOL_IN_TEXT.findall(chunk):
            if not SYMBOL_RE.match(sym):
                continue
            try:
                resolve(sym, anchor=False)
            except SymbolError as exc:
                raise TheoremError(path, line + lineno_offset, str(exc)) from None


def _build(path: str, section: _Section, mutant_modules: tuple[str, ...]) -> Theorem:
    fields = _split_fields(path, section)
    scoped = "SCOPED-OUT" in fields
    for req in _REQUIRED:
        if req not in fields:
            raise TheoremError(path, section.line, f"{section.id} has no **{req}.** field; add one")
    for req in ("ANCHORS", "MUTANTS"):
        if req not in fields and not scoped:
            raise TheoremError(
                path,
                section.line,
                f"{section.id} has no **{req}.** list; add one (or declare **SCOPED-OUT.** "
                "with a reason)",
            )
    texts = {k: _prose(v[1], v[2]) for k, v in fields.items() if k in _TEXT_FIELDS}
    for k, v in texts.items():
        if not v:
            raise TheoremError(path, fields[k][0], f"**{k}.** of {section.id} is empty")
    regime = texts["REGIME"]
    if regime not in REGIMES:
        opts = ", ".join(f"{k} ({v})" for k, v in REGIMES.items())
        raise TheoremError(path, fields["REGIME"][0], f"regime {regime!r} is not one of {opts}")
    _check_symbols(
        path,
        fields["PROOF"][0],
        fields["PROOF"][1] + "\n" + "\n".join(raw for _, raw in fields["PROOF"][2]),
    )
    anchors: list[Anchor] = []
    if "ANCHORS" in fields:
        line, inline, body = fields["ANCHORS"]
        items = _bullets(path, "ANCHORS", line, inline, body)
        if not items and not scoped:
            raise TheoremError(path, line, f"**ANCHORS.** of {section.id} lists no symbol")
        for lineno, item in items:
            m = _CODE_BULLET.match(item)
            if not m or not SYMBOL_RE.match(m.group("code")):
                raise TheoremError(
                    path,
                    lineno,
                    "an anchor is one symbol in backticks, e.g. "
                    "- `fak_core.preflight:Ladder.adjudicate`",
                )
            sym = m.group("code")
            if any(a.symbol == sym for a in anchors):
                raise TheoremError(path, lineno, f"anchor {sym} is listed twice")
            try:
                res = resolve(sym)
            except SymbolError as exc:
                raise TheoremError(path, lineno, str(exc)) from None
            assert res is not None
            anchors.append(Anchor(sym, lineno, res.filename, res.lines, res.sha256))
    mutants: list[MutantDecl] = []
    if "MUTANTS" in fields:
        line, inline, body = fields["MUTANTS"]
        items = _bullets(path, "MUTANTS", line, inline, body)
        if not items and not scoped:
            raise TheoremError(path, line, f"**MUTANTS.** of {section.id} lists no mutant")
        for lineno, item in items:
            m = _CODE_BULLET.match(item)
            if not m or not MUTANT_RE.match(m.group("code")) or not m.group("note"):
                raise TheoremError(
                    path,
                    lineno,
                    "a mutant is a kebab-case name in backticks and a description, e.g. "
                    "- `reversed-rungs` — evaluate the rungs most expensive first",
                )
            name = m.group("code")
            if any(x.name == name for x in mutants):
                raise TheoremError(path, lineno, f"mutant {name} is listed twice")
            mutants.append(MutantDecl(section.id, name, m.group("note"), lineno))
    caveats: list[str] = []
    line, inline, body = fields["CAVEATS"]
    caveats = [text for _, text in _bullets(path, "CAVEATS", line, inline, body)]
    if not caveats:
        raise TheoremError(
            path, line, f"**CAVEATS.** of {section.id} is empty; say what is not proven"
        )
    waivers: list[Waiver] = []
    if "EQUIVALENT-MUTANTS" in fields:
        line, inline, body = fields["EQUIVALENT-MUTANTS"]
        for lineno, item in _bullets(path, "EQUIVALENT-MUTANTS", line, inline, body):
            m = _CODE_BULLET.match(item)
            if not m or "/" not in m.group("code") or not m.group("note"):
                raise TheoremError(
                    path,
                    lineno,
                    "an equivalence waiver is a generated mutant id in backticks and the reason "
                    "it cannot change behaviour, e.g. - `pkg.mod:f/constant/1a2b3c4d` — "
                    "the bound is re-checked by the caller",
                )
            if any(w.mutant_id == m.group("code") for w in waivers):
                raise TheoremError(path, lineno, f"mutant {m.group('code')} is waived twice")
            waivers.append(Waiver(m.group("code"), m.group("note"), lineno))
    depends: list[str] = []
    if "DEPENDS-ON" in fields:
        line, inline, body = fields["DEPENDS-ON"]
        for lineno, item in _bullets(path, "DEPENDS-ON", line, inline, body):
            m = _CODE_BULLET.match(item)
            rel = m.group("code") if m else ""
            if not rel or rel.startswith("/") or ".." in Path(rel).parts or "\\" in rel:
                raise TheoremError(
                    path,
                    lineno,
                    "a dependency is a file path relative to the project root in backticks, "
                    "e.g. - `policies/default.json` — the policy this theorem is about",
                )
            if rel in depends:
                raise TheoremError(path, lineno, f"{rel} is listed twice")
            depends.append(rel)
    text = "\n".join([f"## {section.id} — {section.title}"] + [raw for _, raw in section.lines])
    return Theorem(
        id=section.id,
        title=section.title,
        path=path,
        line=section.line,
        statement=texts["THEOREM"],
        regime=regime,
        proof=texts["PROOF"],
        anchors=tuple(anchors),
        mutants=tuple(mutants),
        caveats=tuple(caveats),
        scoped_out=texts.get("SCOPED-OUT"),
        text=text,
        mutant_modules=mutant_modules,
        equivalent=tuple(waivers),
        depends_on=tuple(depends),
    )


def _preamble_modules(path: str, lines: list[tuple[int, str]]) -> tuple[str, ...]:
    modules: list[str] = []
    active = False
    for lineno, raw in lines:
        m = _LABEL.match(raw)
        if m:
            active = m.group("label") == "MUTANT-MODULES"
            if active and m.group("rest"):
                raise TheoremError(
                    path, lineno, "**MUTANT-MODULES.** takes a bullet list of `module.names`"
                )
            continue
        if active and raw.strip():
            b = _BULLET.match(raw)
            code = _CODE_BULLET.match(b.group("body")) if b else None
            name = code.group("code") if code else ""
            if not re.match(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$", name):
                raise TheoremError(
                    path,
                    lineno,
                    "a mutant module is a dotted module name in backticks: - `pkg.mod`",
                )
            modules.append(name)
    return tuple(modules)


def parse_document(path: str | Path, text: str | None = None) -> list[Theorem]:
    """Parse one theorem document; raise :class:`TheoremError` on the first problem."""
    p = str(path)
    if text is None:
        text = Path(path).read_text(encoding="utf-8")
    preamble: list[tuple[int, str]] = []
    sections: list[_Section] = []
    in_fence = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        raw = raw.rstrip()
        if raw.startswith("```"):
            in_fence = not in_fence
        if raw.startswith("## ") and not in_fence:
            m = _HEADING.match(raw)
            if not m or not ID_RE.match(m.group("id")):
                raise TheoremError(
                    p,
                    lineno,
                    f"a theorem heading is '## <ID> — <title>' with an id like A7.1 (got {raw!r})",
                )
            sections.append(_Section(m.group("id"), m.group("title"), lineno))
        elif raw.startswith("#") and not raw.startswith("# ") and not in_fence and sections:
            raise TheoremError(
                p, lineno, "only '## <ID> — <title>' headings may follow the first theorem"
            )
        elif sections:
            sections[-1].lines.append((lineno, raw))
        else:
            preamble.append((lineno, raw))
    if in_fence:
        raise TheoremError(p, lineno, "a ``` code fence is never closed")
    if not sections:
        raise TheoremError(p, 1, "no theorem found; add a '## <ID> — <title>' section")
    modules = _preamble_modules(p, preamble)
    return [_build(p, s, modules) for s in sections]


class TheoremIndex:
    """All theorems of a run, by id, in document order."""

    def __init__(self, theorems: Iterable[Theorem] = ()) -> None:
        self.by_id: dict[str, Theorem] = {}
        for t in theorems:
            self.add(t)

    def add(self, t: Theorem) -> None:
        if t.id in self.by_id:
            first = self.by_id[t.id]
            raise TheoremError(
                t.path,
                t.line,
                f"duplicate theorem id {t.id} (first defined at {first.path}:{first.line}); "
                "give one of them a new id",
            )
        self.by_id[t.id] = t

    def __contains__(self, tid: object) -> bool:
        return tid in self.by_id

    def __iter__(self) -> Iterator[Theorem]:
        return iter(self.by_id.values())

    def __len__(self) -> int:
        return len(self.by_id)

    def get(self, tid: str) -> Theorem | None:
        return self.by_id.get(tid)


def load_theorems(dirs: Sequence[str | Path]) -> tuple[TheoremIndex, list[TheoremError]]:
    """Parse every ``*.md`` under ``dirs`` (sorted); return the index and all errors found.

    A ``README.md`` is treated as an index page and skipped.
    """
    index = TheoremIndex()
    errors: list[TheoremError] = []
    seen: set[Path] = set()
    for d in dirs:
        root = Path(d)
        if not root.is_dir():
            errors.append(
                TheoremError(
                    root, 0, "theorems directory does not exist; create it or fix the path"
                )
            )
            continue
        for f in sorted(root.rglob("*.md")):
            rf = f.resolve()
            if rf in seen or f.name.lower() == "readme.md":
                continue
            seen.add(rf)
            try:
                for t in parse_document(f):
                    index.add(t)
            except TheoremError as exc:
                errors.append(exc)
    return index, errors
