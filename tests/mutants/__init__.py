"""Deliberate, reversible breakages of our code, one module per theorem document.

Each mutant is registered with :func:`pytest_fak.mutant` under ``<theorem id>/<name>``;
the theorem documents name these modules under **MUTANT-MODULES.**
"""
