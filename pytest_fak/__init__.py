"""pytest_fak: turn documented theorems about a fak kernel into witnessed, dated verdicts.

Run ``pytest --fak-theorems``. Bind tests to theorems with
``@pytest.mark.fak_theorem("A7.1")``; declare mutants with :func:`mutant`; generate
inputs with :mod:`pytest_fak.strategies`. This package imports nothing heavy.
"""

from pytest_fak.mutants import Mutant, MutantRegistry, mutant, registry
from pytest_fak.symbols import ResolvedSymbol, SymbolError, resolve
from pytest_fak.theorems import (
    Anchor,
    MutantDecl,
    Theorem,
    TheoremError,
    TheoremIndex,
    load_theorems,
    parse_document,
)
from pytest_fak.verdicts import ERROR, OPEN, PROVEN, REFUTED, SCOPED_OUT, STALE, VACUOUS, VERDICTS

__version__ = "0.1.0"

__all__ = [
    "ERROR",
    "OPEN",
    "PROVEN",
    "REFUTED",
    "SCOPED_OUT",
    "STALE",
    "VACUOUS",
    "VERDICTS",
    "Anchor",
    "Mutant",
    "MutantDecl",
    "MutantRegistry",
    "ResolvedSymbol",
    "SymbolError",
    "Theorem",
    "TheoremError",
    "TheoremIndex",
    "__version__",
    "load_theorems",
    "mutant",
    "parse_document",
    "registry",
    "resolve",
]
