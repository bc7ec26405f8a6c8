"""``Kernel.decides_without_waiting``: only declared parts let a decision run inline."""

from __future__ import annotations

from pathlib import Path

from fak_core import Kernel, MemoryLedger, Taint, nonblocking
from fak_core.journal import Journal
from fak_core.preflight import Catch, Rung
from fak_core.verdicts import Verdict
from fak_core.view import CallView


def test_the_builtin_chain_is_declared() -> None:
    assert Kernel().decides_without_waiting()


def test_a_journal_keeps_it_declared(tmp_path: Path) -> None:
    kernel = Kernel()
    journal = Journal(tmp_path / "j.db")
    try:
        journal.attach(kernel)
        assert kernel.decides_without_waiting()
    finally:
        journal.close()


def test_an_undeclared_adjudicator_makes_it_wait_in_any_scope() -> None:
    kernel = Kernel()
    kernel.add_adjudicator(lambda view: Verdict.defer("x"), 50, tools=["only_this"])
    assert not kernel.decides_without_waiting()


def test_a_declared_function_adjudicator_is_accepted() -> None:
    @nonblocking
    def quick(view: CallView) -> Verdict:
        return Verdict.defer("quick")

    kernel = Kernel()
    kernel.add_adjudicator(quick, 50)
    assert kernel.decides_without_waiting()


def test_declaring_a_class_covers_its_instances() -> None:
    @nonblocking
    class Quick:
        def adjudicate(self, view: CallView) -> Verdict:
            return Verdict.defer("quick")

    class Slow:
        def adjudicate(self, view: CallView) -> Verdict:
            return Verdict.defer("slow")

    kernel = Kernel()
    kernel.add_adjudicator(Quick(), 50)
    assert kernel.decides_without_waiting()
    kernel.add_adjudicator(Slow(), 60)
    assert not kernel.decides_without_waiting()


def test_undeclared_subscriber_rung_probe_or_ledger_make_it_wait() -> None:
    kernel = Kernel()
    kernel.subscribe(lambda event: None)
    assert not kernel.decides_without_waiting()

    class Extra:
        name = "extra"
        cost = 5.0

        def check(self, view: CallView) -> Catch | None:
            return None

    kernel = Kernel()
    rung: Rung = Extra()
    kernel.add_rung(rung)
    assert not kernel.decides_without_waiting()

    kernel = Kernel()
    kernel.ladder.set_probe(lambda number, rung: None)
    assert not kernel.decides_without_waiting()
    kernel.ladder.set_probe(None)
    assert kernel.decides_without_waiting()


def test_an_undeclared_ledger_makes_it_wait() -> None:
    class Shared:  # a TaintLedger behind a network, say
        def level(self, trace_id: str) -> Taint:
            return Taint.TRUSTED

        def raise_to(self, trace_id: str, taint: Taint) -> Taint:
            return taint

        def reset(self, trace_id: str) -> None:
            pass

        def __len__(self) -> int:
            return 0

    assert not Kernel(ledger=Shared()).decides_without_waiting()
    assert Kernel(ledger=MemoryLedger(16)).decides_without_waiting()
