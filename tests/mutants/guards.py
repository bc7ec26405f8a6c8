"""Mutants for the argument guards (D2.4): each puts back a bug the guards' witnesses
found, so the witnesses must keep finding it."""

from __future__ import annotations

from typing import Any

from pytest_fak import mutant
from tests.mutants.sourcepatch import edited


@mutant("D2.4/ansi-octal-unmasked")
def ansi_octal_unmasked() -> Any:
    """An octal escape of ``$'...'`` is read as its whole value, not its low byte as bash
    reads it: ``$'secrets\\457k.pem'`` (bash: ``secrets/k.pem``) is not denied (the bug)."""
    from fak_core import selfmodify

    return edited(selfmodify._ansi_bytes, ("bytes((int(e, 8) & 0xFF,))", "chr(int(e, 8)).encode()"))


@mutant("D2.4/ansi-nul-kept")
def ansi_nul_kept() -> Any:
    """An escaped NUL does not end a ``$'...'`` string: ``$'fak-policy.json\\0.bak'`` (bash:
    ``fak-policy.json``) is not denied (the bug)."""
    from fak_core import selfmodify

    return edited(selfmodify.ansi_c, ('.partition(b"\\0")[0]', ""))


@mutant("D2.4/question-mark-blocks-options")
def question_mark_blocks_options() -> Any:
    """A glob holding ``?`` keeps ``=`` and ``:`` inside a part, though ``?`` matches the
    ``/`` they become: ``--out=secrets/kx.pem`` is missed under ``secrets/k?.pem`` (the
    original gap)."""
    from fak_core.selfmodify import Gated

    return edited(
        Gated.__init__, ('plain = "[" not in glob', 'plain = "?" not in glob and "[" not in glob')
    )
