"""A service call: its input checked, its work ready to run in a transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from flowledger.domain.records import direct_init
from flowledger.services.port import Tx
from flowledger.storage.unit_of_work import UnitOfWork

T = TypeVar("T")


@direct_init
@dataclass(frozen=True)
class Call(Generic[T]):
    """One service call, its input already checked: ``work`` runs it inside a transaction.
    :meth:`run` gives it a transaction of its own; the receiver passes ``work`` to
    :meth:`UnitOfWork.run_many` with others instead. A person's decision names its actor
    (``operator:<name>``) when it is made; a workflow call is told its actor when run. The
    work is written against the services' port (:class:`flowledger.services.port.Tx`): a
    test may run it on a fake."""

    unit: UnitOfWork
    work: Callable[[Tx], T]
    actor: str | None = None

    def run(self, actor: str | None = None) -> T:
        who = actor if actor is not None else self.actor
        if who is None:
            raise TypeError("run() needs the actor: who makes this call")
        return self.unit.run(who, self.work)
