"""A fake of the services' port (:class:`flowledger.services.port.Tx`) and of the unit of work
that hands it out, keeping the ledger's rows in dicts: a service runs against it without a
database, as cosmicpython's ``FakeRepository`` and ``FakeUnitOfWork`` let its services run.

A transaction writes into the rows as it goes and keeps what each write replaced, so a work
that raises leaves them as they were. An operation is compare-and-set on its ``version`` and
``state`` as on the database: a row changed since it was read is a
:class:`~flowledger.storage.tx.Conflict`, and the work runs again. ``meanwhile`` runs
something (another call, say) right after the next transaction's first read, to stage a race.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from flowledger import domain
from flowledger.domain import OpenHold, Reason, causes
from flowledger.domain.redact import NO_SECRETS, Secrets, redact, secrets_of
from flowledger.domain.twins import Mark
from flowledger.plumbing.clock import Clock
from flowledger.storage.sql import Row
from flowledger.storage.tx import Conflict, PendingEvent

_SETTABLE = ("workflow_id", "step", "source", "input_ref", "approval_version")
_MISSING = object()


@dataclass
class Tables:
    """The rows a fake ledger holds, by key."""

    operations: dict[str, dict[str, Any]] = field(default_factory=dict)
    attempts: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    receipts: list[dict[str, Any]] = field(default_factory=list)
    holds: dict[int, dict[str, Any]] = field(default_factory=dict)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    pins: list[dict[str, Any]] = field(default_factory=list)
    retries: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)


class FakeTx:
    """One transaction over :class:`Tables`: the port's methods, nothing of SQL."""

    def __init__(self, unit: FakeUnitOfWork, now: datetime, actor: str) -> None:
        self.unit = unit
        self.tables = unit.tables
        self.now = now
        self.actor = actor
        self.events: list[PendingEvent] = []
        self.locked: list[str] = []  # operations locked, in order
        self._undo: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ the transaction

    def event(
        self, kind: str, operation_id: str | None, data: dict[str, Any], hold_id: int | None = None
    ) -> None:
        self.events.append(PendingEvent(self.now, self.actor, kind, operation_id, hold_id, data))

    def together(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def time(self, value: datetime | None) -> Any:
        return value

    def rollback(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def _put(self, table: dict[Any, Any], key: Any, value: dict[str, Any]) -> None:
        old = table.get(key, _MISSING)
        self._undo.append(lambda: table.pop(key) if old is _MISSING else table.update({key: old}))
        table[key] = value

    def _append(self, rows: list[dict[str, Any]], value: dict[str, Any]) -> None:
        self._undo.append(rows.pop)
        rows.append(value)

    def _read(self) -> None:
        self.unit.after_read()

    # ------------------------------------------------------------------ operations

    def load_operation(self, operation_id: str) -> Row | None:
        self.locked.append(operation_id)
        found = self.tables.operations.get(operation_id)
        self._read()
        return None if found is None else Row(found)

    def load_with_holds(
        self, operation_id: str, mark: bool = False
    ) -> tuple[Row | None, list[OpenHold]]:
        row = self.load_operation(operation_id)
        return (None, []) if row is None else (row, self.holds_of(operation_id))

    def lock_operations(self, operation_ids: Sequence[str]) -> None:
        self.locked.extend(sorted(set(operation_ids)))

    def read_again(self, operation_ids: Sequence[str]) -> None:
        """Nothing is read ahead here."""

    def dispatching_for_execution(self, execution_id: str) -> list[Row]:
        ops = self.tables.operations
        return [
            Row(ops[k])
            for k in sorted(ops)
            if ops[k]["state"] == "dispatching" and ops[k]["execution_id"] == execution_id
        ]

    def save_operation(
        self,
        row: Row | None,
        op: domain.Operation,
        extra: dict[str, Any] | None = None,
        mark: Mark | None = None,
    ) -> None:
        extra = {k: v for k, v in (extra or {}).items() if v is not None}
        approval = op.reapproval
        values: dict[str, Any] = {
            "state": op.state.value,
            "attempt": op.attempt,
            "max_attempts": op.max_attempts,
            "execution_id": op.execution_id,
            "run_index": op.run_index,
            "receipt": op.receipt,
            "deadline": op.deadline,
            "reapproved_version": approval.version if approval else None,
            "reapproved_until": approval.expires_at if approval else None,
            "updated_at": self.now,
            **{k: extra[k] for k in (*_SETTABLE, "approval_expires_at") if k in extra},
        }
        if mark is not None or row is None:
            values.update(_mark_values(mark))
        current = self.tables.operations.get(op.operation_id)
        if row is None:
            if current is not None:  # the database's unique key: another writer was first
                raise Conflict()
            new = {k: None for k in (*_SETTABLE, "approval_expires_at")}
            new.update(
                operation_id=op.operation_id,
                input_hash=op.input_hash,
                processing_version=op.processing_version,
                version=1,
                created_at=self.now,
                **values,
            )
            self._put(self.tables.operations, op.operation_id, new)
            return
        if current is None or (current["version"], current["state"]) != (row.version, row.state):
            raise Conflict()
        changed = {**current, **values, "version": current["version"] + 1}
        self._put(self.tables.operations, op.operation_id, changed)

    def mark_dispatch(self, operation_id: str, mark: Mark | None) -> None:
        current = self.tables.operations[operation_id]
        self._put(self.tables.operations, operation_id, {**current, **_mark_values(mark)})

    def insert_attempt(self, op: domain.Operation, extra: dict[str, Any]) -> None:
        self._put(
            self.tables.attempts,
            (op.operation_id, op.attempt),
            {
                "execution_id": op.execution_id,
                "run_index": op.run_index,
                "workflow_id": extra.get("workflow_id"),
                "step": extra.get("step"),
                "source": extra.get("source"),
                "dispatched_at": self.now,
                "deadline": op.deadline,
                "outcome": "dispatching",
                "ended_at": None,
                "error": None,
            },
        )

    def end_attempt(
        self, operation_id: str, number: int, outcome: str, error: str | None = None
    ) -> None:
        attempt = self.tables.attempts.get((operation_id, number))
        if attempt is not None:
            ended = {**attempt, "outcome": outcome, "ended_at": self.now, "error": error or None}
            self._put(self.tables.attempts, (operation_id, number), ended)

    def unsent_attempts(self, operation_id: str) -> int:
        return sum(
            1
            for (op, _), a in self.tables.attempts.items()
            if op == operation_id and a["outcome"] == domain.UNSENT
        )

    def insert_receipt(
        self,
        operation_id: str,
        attempt: int,
        receipt: str,
        *,
        kind: str,
        execution_id: str | None = None,
        detail: str | None = None,
    ) -> None:
        self._append(
            self.tables.receipts,
            {
                "operation_id": operation_id,
                "attempt": attempt,
                "receipt": receipt,
                "execution_id": execution_id,
                "confirmed_at": self.now,
                "confirmed_by": self.actor,
                "kind": kind,
                "detail": detail,
            },
        )

    def forget_answer(self, token_id: int, key: str, operation_id: str) -> bool:
        stored = self.tables.answers.get((token_id, key))
        if stored is None or stored.get("operation_id") != operation_id:
            return False
        if stored.get("decision") != "go":
            return False
        old = self.tables.answers.pop((token_id, key))
        self._undo.append(lambda: self.tables.answers.update({(token_id, key): old}))
        return True

    # ------------------------------------------------------------------ holds

    def holds_of(self, operation_id: str) -> list[OpenHold]:
        return [
            OpenHold(i, Reason(h["reason"]), bool(h["blocking"]), h["cause_key"])
            for i, h in sorted(self.tables.holds.items())
            if h["operation_id"] == operation_id and h["resolved_at"] is None
        ]

    def insert_new_holds(self, rows: list[dict[str, Any]]) -> dict[str, int]:
        taken = {h["cause_key"] for h in self.tables.holds.values()}
        ids: dict[str, int] = {}
        for row in rows:
            if row["cause_key"] in taken:
                continue
            hold_id = max(self.tables.holds, default=0) + 1
            self._put(
                self.tables.holds,
                hold_id,
                {
                    **row,
                    "id": hold_id,
                    "resolved_at": None,
                    "resolved_by": None,
                    "resolution": None,
                    "resolution_note": None,
                    "owner": None,
                    "next_action": None,
                    "version": 0,
                    "occurrences": 1,
                },
            )
            ids[row["cause_key"]] = hold_id
        return ids

    def load_hold(self, hold_id: int) -> Row | None:
        found = self.tables.holds.get(hold_id)
        return None if found is None else Row(found)

    def open_overdue_about(self, hold_id: int) -> list[int]:
        low, high = causes.overdue_key_range(hold_id)
        return [
            i
            for i, h in sorted(self.tables.holds.items())
            if low <= h["cause_key"] < high and h["resolved_at"] is None
        ]

    def close_hold(self, hold_id: int, resolution: str | None, note: str) -> bool:
        hold = self.tables.holds.get(hold_id)
        if hold is None or hold["resolved_at"] is not None:
            return False
        closed = {
            **hold,
            "resolved_at": self.now,
            "resolved_by": self.actor,
            "resolution": resolution,
            "resolution_note": note,
            "version": hold["version"] + 1,
        }
        self._put(self.tables.holds, hold_id, closed)
        return True

    def change_hold(self, hold_id: int, version: int, values: dict[str, Any]) -> None:
        hold = self.tables.holds.get(hold_id)
        if hold is None or hold["version"] != version or hold["resolved_at"] is not None:
            raise Conflict()
        self._put(self.tables.holds, hold_id, {**hold, **values, "version": version + 1})

    def add_hold_evidence(self, hold_id: int, evidence: str) -> str | None:
        hold = self.tables.holds.get(hold_id)
        if hold is None or hold["resolved_at"] is not None:
            return None
        detail = causes.with_evidence(hold["detail"], evidence)
        self._put(
            self.tables.holds, hold_id, {**hold, "detail": detail, "version": hold["version"] + 1}
        )
        return detail

    def count_cause(self, cause_key: str, evidence: str) -> tuple[int, bool] | None:
        for hold_id, hold in self.tables.holds.items():
            if hold["cause_key"] != cause_key:
                continue
            counted = {**hold, "occurrences": hold["occurrences"] + 1}
            still_open = hold["resolved_at"] is None
            if still_open:
                counted["detail"] = causes.with_evidence(hold["detail"], evidence)
                counted["version"] = hold["version"] + 1
            self._put(self.tables.holds, hold_id, counted)
            return hold_id, still_open
        return None

    def insert_alerts(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            self._append(self.tables.alerts, row)

    def insert_pins(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            self._append(self.tables.pins, row)

    def ask_retry(self, row: dict[str, Any]) -> bool:
        if any(r["hold_id"] == row["hold_id"] for r in self.tables.retries):
            return False
        self._append(self.tables.retries, row)
        return True


def _mark_values(mark: Mark | None) -> dict[str, Any]:
    return {
        "last_execution_id": mark.execution_id if mark else None,
        "last_workflow_id": mark.workflow_id if mark else None,
        "last_dispatched_at": mark.at if mark else None,
        "twin_execution_id": mark.twin_of if mark else None,
    }


@dataclass
class FakeStore:
    """What a ledger asks of its store besides the unit of work."""

    dialect: str = "fake"


class FakeUnitOfWork:
    """Runs a work in a :class:`FakeTx`, again when it lost a compare-and-set; keeps what
    committed in :attr:`tables` and :attr:`events`, what rolled back nowhere."""

    def __init__(
        self, clock: Clock = lambda: datetime(2026, 1, 1, tzinfo=UTC), secrets: Secrets = NO_SECRETS
    ) -> None:
        self.clock = clock
        self.secrets = secrets
        self.retries = 20
        self.store = FakeStore()
        self.tables = Tables()
        self.events: list[PendingEvent] = []
        self.commits = 0
        self.runs = 0  # transactions begun, committed or not
        self.meanwhile: list[Callable[[], object]] = []

    def run(self, actor: str, work: Callable[[FakeTx], Any]) -> Any:
        for attempt in range(self.retries):
            self.runs += 1
            tx = FakeTx(self, self.clock().astimezone(UTC), actor)
            try:
                value = work(tx)
            except Conflict:
                tx.rollback()
                if attempt + 1 == self.retries:
                    raise
                continue
            except BaseException:
                tx.rollback()
                raise
            self.events.extend(tx.events)
            self.commits += 1
            return value
        raise RuntimeError("unreachable")

    def after_read(self) -> None:
        """Run what was staged to happen between a transaction's read and its writes."""
        staged, self.meanwhile = self.meanwhile, []
        for run in staged:
            run()

    def redact(self, text: str) -> str:
        return redact(text, self.secrets)

    def add_secrets(self, values: Sequence[str]) -> None:
        self.secrets = secrets_of([*self.secrets.values, *values])
