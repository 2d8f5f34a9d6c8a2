"""The sweep's rules: each module of :mod:`flowledger.scheduled.sweep.rules` registers its own
with :func:`rule`, and the package imports every one of them, so a new rule is its module."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flowledger.domain import Reason
from flowledger.scheduled.sweep.batches import Batches

# Runs one rule to the end over the due rows it finds; the holds it opened.
RuleRun = Callable[[Batches], int]


@dataclass(frozen=True)
class Rule:
    """``run`` opens the holds of ``reason`` that are due; a sweep runs its rules by ``order``
    (a reason may have several rules, one per walk)."""

    reason: Reason
    order: int
    run: RuleRun

    @property
    def name(self) -> str:
        return f"{self.run.__module__.rsplit('.', 1)[-1]}.{self.run.__name__}"


RULES: list[Rule] = []


def rule(reason: Reason, *, order: int) -> Callable[[RuleRun], RuleRun]:
    """Register the decorated function as a rule of the sweep for ``reason``. Orders are
    unique, so the sweep's order never depends on which module was imported first."""

    def register(run: RuleRun) -> RuleRun:
        taken = [r.name for r in RULES if r.order == order]
        if taken:
            raise ValueError(f"sweep rule order {order} is taken by {taken[0]}")
        RULES.append(Rule(reason, order, run))
        RULES.sort(key=lambda r: r.order)
        return run

    return register
