"""The port the services' works are written against: what a work asks of its transaction.

A work (:mod:`flowledger.services.operations`, :mod:`flowledger.services.holds`) reads the
rows a rule needs, writes its outcome and records its events through these methods and nothing
else: no SQL, no driver, no pipeline. The services own this port, as cosmicpython's service
layer owns its repository's: :class:`flowledger.storage.transaction.SqlTx` implements it on the
database (mypy checks it where a work is handed to the unit of work, a ``Protocol`` costing
nothing at run time), and ``tests/unit/fakes.py`` implements it over dicts, so a service is
tested without a database. The sync and the sweep run SQL of their own and take the
``SqlTx`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from flowledger import domain
from flowledger.domain import OpenHold
from flowledger.domain.twins import Mark
from flowledger.storage.sql import Row


class Operations(Protocol):
    """Operations, their attempts and receipts (:mod:`flowledger.storage.operations`)."""

    def load_operation(self, operation_id: str) -> Row | None:
        """The operation, locked until the commit."""

    def load_with_holds(
        self, operation_id: str, mark: bool = False
    ) -> tuple[Row | None, list[OpenHold]]:
        """The operation (locked until the commit) and its open holds; ``mark``: with who
        dispatched it last (:func:`flowledger.storage.operations.mark_of`)."""

    def lock_operations(self, operation_ids: Sequence[str]) -> None:
        """Lock the operations until the commit, so that a writer reading one waits."""

    def read_again(self, operation_ids: Sequence[str]) -> None:
        """A hold was opened or closed about these operations: a later read sees it."""

    def dispatching_for_execution(self, execution_id: str) -> list[Row]:
        """The operations in flight whose current attempt this execution made, locked."""

    def save_operation(
        self,
        row: Row | None,
        op: domain.Operation,
        extra: dict[str, Any] | None = None,
        mark: Mark | None = None,
    ) -> None:
        """Insert ``op`` (``row`` None) or compare-and-set it over ``row``: a row changed
        since it was read raises :class:`flowledger.storage.tx.Conflict`, and the work runs
        again. ``mark``: the last execution that dispatched it, when that changed."""

    def mark_dispatch(self, operation_id: str, mark: Mark | None) -> None:
        """Record the last execution that dispatched the operation, without changing it."""

    def insert_attempt(self, op: domain.Operation, extra: dict[str, Any]) -> None: ...

    def end_attempt(
        self, operation_id: str, number: int, outcome: str, error: str | None = None
    ) -> None: ...

    def unsent_attempts(self, operation_id: str) -> int:
        """How many of the operation's attempts ended ``unsent``."""

    def insert_receipt(
        self,
        operation_id: str,
        attempt: int,
        receipt: str,
        *,
        kind: str,
        execution_id: str | None = None,
        detail: str | None = None,
    ) -> None: ...

    def forget_answer(self, token_id: int, key: str, operation_id: str) -> bool:
        """Remove the ``go`` stored under the token's ``Idempotency-Key`` for the operation."""


class Holds(Protocol):
    """Holds and the alerts queued with them (:mod:`flowledger.storage.holds`)."""

    def holds_of(self, operation_id: str) -> list[OpenHold]:
        """The open holds about an operation, oldest first."""

    def insert_new_holds(self, rows: list[dict[str, Any]]) -> dict[str, int]:
        """Insert the rows whose cause key has no hold yet; their new ids by cause key."""

    def load_hold(self, hold_id: int) -> Row | None: ...

    def open_overdue_about(self, hold_id: int) -> list[int]:
        """The open ``overdue`` holds about hold ``hold_id``."""

    def close_hold(self, hold_id: int, resolution: str | None, note: str) -> bool:
        """Close an open hold; False when it was closed already."""

    def change_hold(self, hold_id: int, version: int, values: dict[str, Any]) -> None:
        """Compare-and-set an open hold's owner, deadline or next action."""

    def add_hold_evidence(self, hold_id: int, evidence: str) -> str | None:
        """Add evidence to an open hold's detail; the detail, or None if it is closed."""

    def count_cause(self, cause_key: str, evidence: str) -> tuple[int, bool] | None:
        """One more cause for the hold of ``cause_key`` (its evidence added while open): the
        hold's id and whether it is open, or None when the cause has no hold."""

    def insert_alerts(self, rows: list[dict[str, Any]]) -> None: ...

    def insert_pins(self, rows: list[dict[str, Any]]) -> None:
        """Queue executions to pin, with the holds about them."""

    def ask_retry(self, row: dict[str, Any]) -> bool:
        """Record a retry asked for a hold, once a hold (``False``: asked before)."""


class Tx(Operations, Holds, Protocol):
    """One write transaction as a work sees it: the time it runs at, its repositories, its
    events, and the writes that may go out together."""

    now: datetime

    def event(
        self, kind: str, operation_id: str | None, data: dict[str, Any], hold_id: int | None = None
    ) -> None:
        """Record an event, appended to the chain just before the commit."""

    def together(self) -> AbstractContextManager[None]:
        """A block whose writes (none of which reads or depends on another) may be sent as
        one statement."""

    def time(self, value: datetime | None) -> Any:
        """``value`` as a statement binds it."""
