"""One sweep: every registered rule, in order, timed."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from flowledger.domain.display import counted
from flowledger.scheduled.sweep.batches import Batches
from flowledger.scheduled.sweep.registry import RULES

log = logging.getLogger(__package__)  # the sweep's logger, as before it was a package


@dataclass
class SweepResult:
    """Holds opened by each reason's rules in one sweep, and the seconds they took."""

    opened: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.opened.values())


class Sweep(Batches):
    """The sweep over one ledger: :meth:`run` runs every rule of
    :data:`~flowledger.scheduled.sweep.registry.RULES`."""

    def run(self) -> SweepResult:
        result = SweepResult()
        for rule in RULES:
            reason = rule.reason.value
            started = time.perf_counter()
            result.opened[reason] = result.opened.get(reason, 0) + rule.run(self)
            spent = time.perf_counter() - started
            result.seconds[reason] = result.seconds.get(reason, 0.0) + spent
        if result.total:
            log.info("sweep opened %s: %s", counted(result.total, "hold"), result.opened)
        return result
