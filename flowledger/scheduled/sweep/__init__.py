"""The staleness sweep: find what waited too long and open a hold for it, once per cause.

One rule module per hold reason (:mod:`flowledger.scheduled.sweep.rules`), each registering its
rules (:mod:`~flowledger.scheduled.sweep.registry`); this package imports every module there,
so adding a swept reason is its domain entry (``Reason``, ``causes.PARTS``) and its rule module.
A rule reads its due rows through :mod:`flowledger.storage.due` a bounded batch at a time and
opens their holds in the same transaction (:mod:`~flowledger.scheduled.sweep.batches`).

Races with the workflow: the due operations are locked (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` serialises writers anyway) until the hold commits.
Every writer locks the operation it reads (``flowledger.storage.operations.lock_operations``), so an
operation a confirm is deciding on is skipped until a later sweep; a confirm that reads one
the sweep holds waits for the hold's commit, then sees the hold and resolves it; a confirm
that committed first moves the operation out of ``dispatching`` and the sweep's query no
longer matches it.
"""

from __future__ import annotations

import importlib
import pkgutil

from flowledger.scheduled.sweep import rules
from flowledger.scheduled.sweep.batches import BATCH, IN_FLIGHT
from flowledger.scheduled.sweep.driver import Sweep, SweepResult
from flowledger.scheduled.sweep.registry import RULES, Rule

for _module in pkgutil.iter_modules(rules.__path__):
    importlib.import_module(f"{rules.__name__}.{_module.name}")

__all__ = ["BATCH", "IN_FLIGHT", "RULES", "Rule", "Sweep", "SweepResult"]
