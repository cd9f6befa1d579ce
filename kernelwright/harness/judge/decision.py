"""What a rule decides, as a value: the judge's functions read typed reports and return one of
these; the phases apply it to the result (`phases/context.apply`). No rule changes a result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kernelwright.harness.result import Flag
from kernelwright.harness.verdicts import Reason, Verdict


@dataclass(frozen=True)
class Decision:
    """A verdict (None: the one the result has stands) with its reason and message, a note added
    to the message, flags to add, whether the speedups are withdrawn, and result fields to set
    (`updates`: EvalResult field name to value)."""

    verdict: Verdict | None = None
    reason: Reason | None = None
    message: str | None = None  # None: the message stays (`note` is still added)
    note: str = ""
    flags: tuple[Flag, ...] = ()
    clear_speedups: bool = False
    updates: Mapping[str, object] = field(default_factory=dict)

    @property
    def ends(self) -> bool:
        """Whether it ends the evaluation: a verdict other than correct."""
        return self.verdict is not None and self.verdict != Verdict.CORRECT


def ending(verdict: Verdict, reason: Reason | None, message: str, *, clear_speedups: bool = False) -> Decision:
    """A decision that ends the evaluation on `verdict`."""
    return Decision(verdict=verdict, reason=reason, message=message, clear_speedups=clear_speedups)


class PhaseEnd(Protocol):
    """How a worker's phase ended (`workers.process.Outcome` is one): the judge reads only this."""

    @property
    def timed_out(self) -> bool: ...
    @property
    def died(self) -> Reason | None: ...
    @property
    def detail(self) -> str: ...
