"""The bundled theorem pack: generic theorems about any fak kernel, with their witnesses.

``pytest --fak-theorems --fak-pack`` loads ``theorems/`` from here, collects the
``witness_*.py`` modules and runs them against the kernel a downstream
``pytest_fak_make_kernel`` returns (default ``fak_core.Kernel()``). The mutants live in
:mod:`pytest_fak.pack.mutants`.
"""

__all__: list[str] = []
