"""The ledger's tables as its events alone say they must be: a replay of the event chain into
a fresh projection of operations, attempts, receipts and holds (``flowledger verify --deep``).

Each event records what its transition decided, so a replay rebuilds every column the events
carry and compares only those. What no event records is left out, and named here so that a
reader knows what ``--deep`` cannot vouch for:

- operations: ``workflow_id``, ``step``, ``source``, ``approval_version`` and
  ``approval_expires_at`` come from the request and are not in the events; ``version`` is a
  compare-and-set counter (in a ledger written before writers locked the operations they
  read, it also moved when a hold was opened, without an event of its own);
- attempts: ``workflow_id``, ``step`` and ``source`` (as for operations), and the row's ``id``;
- receipts: ``detail`` of a workflow's receipt (a person's evidence keeps its note, which is
  compared), the row's ``id`` (receipts are matched per operation by content, then in time
  order), and the ``attempt`` of a conflicting receipt recorded before its event named it.

Columns a chain recorded only from some point on: an operation's ``deadline``,
``max_attempts`` and ``input_ref`` (and an attempt's ``deadline``) are in the event of the
call that wrote them (``prepared``, ``dispatched``, a ``dispatch_held`` that created the
operation), a hold's ``cause_key`` and first ``deadline`` in its ``hold_opened``. An event
written before it carried them leaves the column unknown, and an unknown column is not
compared: ``max_attempts`` for good (only the creating event sets it, until a person allows
another attempt, whose event says the new one), ``deadline`` and
``input_ref`` until a later event records them again. A release for retry has always cleared
the operation's deadline, so it is known (``None``) from then on. A hold opened before its
event recorded the deadline is compared on it once a person extends it.

Pure: events in, projected rows out; reading and comparing is
:mod:`flowledger.storage.reads.replay`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flowledger.domain.causes import with_evidence
from flowledger.domain.chain import time_of_data
from flowledger.domain.model import UNSENT, Resolution, State

# The columns a replay rebuilds, per table, in the order findings name them.
OPERATION_COLUMNS = (
    "state", "input_hash", "processing_version", "attempt", "max_attempts", "execution_id",
    "run_index", "receipt", "deadline", "input_ref", "reapproved_version", "reapproved_until",
    "created_at", "updated_at",
)  # fmt: skip
ATTEMPT_COLUMNS = (
    "execution_id", "run_index", "dispatched_at", "deadline", "outcome", "ended_at", "error",
)  # fmt: skip
RECEIPT_COLUMNS = ("attempt", "receipt", "execution_id", "confirmed_at", "confirmed_by", "kind")
HOLD_COLUMNS = (
    "cause_key", "reason", "blocking", "operation_id", "execution_id", "source", "detail",
    "opened_at", "deadline", "owner", "next_action", "resolved_at", "resolved_by", "resolution",
    "resolution_note", "version",
)  # fmt: skip

# A person's decisions change the operation; each is one or more ``hold_resolved`` events in
# a row (one per hold it closes, with the ``overdue`` holds about them in between).
_DECISIONS = frozenset(
    {
        Resolution.CONFIRMED_WITH_EVIDENCE,
        Resolution.RELEASED_FOR_RETRY,
        Resolution.CANCELLED,
        Resolution.REAPPROVED,
        Resolution.ATTEMPT_ALLOWED,
    }
)
_HOLD_CHANGES = ("hold_assigned", "hold_extended", "hold_noted", "hold_evidence")


@dataclass(frozen=True)
class EventRow:
    """One event as the replay reads it (its data already parsed)."""

    seq: int
    at: datetime
    actor: str
    kind: str
    operation_id: str | None
    hold_id: int | None
    data: dict[str, Any]


@dataclass
class Projected:
    """A row as the events build it: ``values`` by column; columns the events have not (yet)
    determined are absent and not compared."""

    key: Any
    values: dict[str, Any]
    seq: int  # the event that created it


@dataclass
class Projection:
    """Operations, attempts (by ``(operation_id, number)``), receipts (per operation, in chain
    order) and holds (by id), and the events that could not be applied (``problems``)."""

    operations: dict[str, Projected] = field(default_factory=dict)
    attempts: dict[tuple[str, int], Projected] = field(default_factory=dict)
    receipts: dict[str, list[Projected]] = field(default_factory=dict)
    holds: dict[int, Projected] = field(default_factory=dict)
    problems: list[tuple[int, str]] = field(default_factory=list)
    _decision: dict[str, tuple[int, datetime, str]] = field(default_factory=dict)

    def apply(self, ev: EventRow) -> None:
        """Replay one event; events must come in chain order. An event whose data the writer
        could not have written (a chain rewritten with care links up whatever it holds) is
        a problem, never an exception."""
        try:
            handler = _HANDLERS.get(ev.kind)
            if handler is not None:
                handler(self, ev)
            if ev.hold_id is not None and ev.kind != "hold_opened":
                self._hold_change(ev)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            self.problems.append((ev.seq, f"{ev.kind} cannot be replayed ({exc})"))

    # ------------------------------------------------------------------ operations

    def _create(self, ev: EventRow, state: State) -> dict[str, Any] | None:
        if ev.operation_id is None:
            self.problems.append((ev.seq, f"{ev.kind} names no operation"))
            return None
        if ev.operation_id in self.operations:
            self.problems.append((ev.seq, f"creates operation {ev.operation_id} a second time"))
            return None
        values = {
            "state": state.value,
            "input_hash": ev.data.get("input_hash"),
            "processing_version": ev.data.get("processing_version"),
            "attempt": 0,
            "execution_id": None,
            "run_index": None,
            "receipt": None,
            "reapproved_version": None,
            "reapproved_until": None,
            "created_at": ev.at,
            "updated_at": ev.at,
        }
        if "max_attempts" in ev.data:  # not in a creating event written before it was
            values["max_attempts"] = ev.data["max_attempts"]
        self.operations[ev.operation_id] = Projected(ev.operation_id, values, ev.seq)
        self._written_with(ev, values, created=True)
        return values

    @staticmethod
    def _written_with(ev: EventRow, values: dict[str, Any], *, created: bool) -> None:
        """The ``deadline`` and ``input_ref`` an event says its call wrote; an event from
        before it said so makes them unknown (removed, so not compared). An existing
        operation keeps its ``input_ref`` when the call sent none (``None``)."""
        if "deadline" in ev.data:
            values["deadline"] = time_of_data(ev.data["deadline"])
        else:
            values.pop("deadline", None)
        if "input_ref" not in ev.data:
            values.pop("input_ref", None)
        elif created or ev.data["input_ref"] is not None:
            values["input_ref"] = ev.data["input_ref"]

    def _op(self, ev: EventRow) -> dict[str, Any] | None:
        found = self.operations.get(ev.operation_id or "")
        if found is None:
            self.problems.append(
                (ev.seq, f"{ev.kind} concerns operation {ev.operation_id}, which no earlier "
                 "event created")
            )  # fmt: skip
            return None
        return found.values

    def _prepared(self, ev: EventRow) -> None:
        self._create(ev, State.PREPARED)

    def _held(self, ev: EventRow) -> None:
        if ev.data.get("created"):  # a new operation held by its approval: created prepared
            self._create(ev, State.PREPARED)

    def _dispatched(self, ev: EventRow) -> None:
        created = bool(ev.data.get("created"))
        op = self._create(ev, State.DISPATCHING) if created else self._op(ev)
        if op is None:
            return
        op.update(
            state=State.DISPATCHING.value,
            attempt=ev.data.get("attempt"),
            execution_id=ev.data.get("execution_id"),
            run_index=ev.data.get("run_index"),
            updated_at=ev.at,
        )
        if not created:
            self._written_with(ev, op, created=False)
        key = (ev.operation_id or "", int(ev.data.get("attempt") or 0))
        attempt = {
            "execution_id": ev.data.get("execution_id"),
            "run_index": ev.data.get("run_index"),
            "dispatched_at": ev.at,
            "outcome": "dispatching",
            "ended_at": None,
            "error": None,
        }
        if "deadline" in op:  # the attempt is written with the operation's deadline
            attempt["deadline"] = op["deadline"]
        self.attempts[key] = Projected(key, attempt, ev.seq)

    def _end_attempt(self, ev: EventRow, op: dict[str, Any], outcome: str, error: Any) -> None:
        attempt = self.attempts.get((ev.operation_id or "", int(op["attempt"] or 0)))
        if attempt is None:
            self.problems.append((ev.seq, f"ends attempt {op['attempt']} that was never made"))
            return
        attempt.values.update(outcome=outcome, ended_at=ev.at, error=error or None)

    def _receipt(self, ev: EventRow, op: dict[str, Any], kind: str, **values: Any) -> None:
        row = {
            "attempt": op["attempt"],
            "receipt": ev.data.get("receipt"),
            "execution_id": ev.data.get("execution_id"),
            "confirmed_at": ev.at,
            "confirmed_by": ev.actor,
            "kind": kind,
            **values,
        }
        found = self.receipts.setdefault(ev.operation_id or "", [])
        found.append(Projected((ev.operation_id, len(found) + 1), row, ev.seq))

    def _confirmed(self, ev: EventRow) -> None:
        op = self._op(ev)
        if op is None:
            return
        self._end_attempt(ev, op, "confirmed", None)
        op.update(state=State.CONFIRMED.value, receipt=ev.data.get("receipt"), updated_at=ev.at)
        self._receipt(ev, op, "workflow")

    def _receipt_conflict(self, ev: EventRow) -> None:
        """A receipt for an operation already ended: written without a compare-and-set, so
        an attempt dispatched meanwhile may come first in the chain. Its event names the
        attempt the receipt was stored with; an older event did not, and then the attempt is
        not compared."""
        op = self._op(ev)
        if op is None:
            return
        self._receipt(ev, op, "conflict", attempt=ev.data.get("attempt"))
        if "attempt" not in ev.data:
            del self.receipts[ev.operation_id or ""][-1].values["attempt"]

    def _failed(self, ev: EventRow) -> None:
        op = self._op(ev)
        if op is None:
            return
        self._end_attempt(ev, op, "rejected", ev.data.get("error"))
        op.update(state=State.FAILED.value, updated_at=ev.at)

    def _failed_unknown(self, ev: EventRow) -> None:
        op = self._op(ev)  # unchanged, but written (compare-and-set) at this time
        if op is not None:
            op["updated_at"] = ev.at

    def _released(self, ev: EventRow) -> None:
        """The workflow gave back a ``go`` it did not write: ``prepared`` again."""
        op = self._op(ev)
        if op is None:
            return
        self._end_attempt(ev, op, UNSENT, ev.data.get("reason"))
        op.update(
            state=State.PREPARED.value,
            execution_id=None,
            run_index=None,
            deadline=None,
            updated_at=ev.at,
        )

    # ------------------------------------------------------------------ holds

    def _hold_opened(self, ev: EventRow) -> None:
        if ev.hold_id is None or ev.hold_id in self.holds:
            self.problems.append((ev.seq, f"opens hold {ev.hold_id} a second time"))
            return
        values = {
            "reason": ev.data.get("reason"),
            "blocking": bool(ev.data.get("blocking")),
            "operation_id": ev.operation_id,
            "execution_id": ev.data.get("execution_id"),
            "source": ev.data.get("source"),
            "detail": ev.data.get("detail"),
            "opened_at": ev.at,
            "owner": None,
            "next_action": None,
            "resolved_at": None,
            "resolved_by": None,
            "resolution": None,
            "resolution_note": None,
            "version": 0,
        }
        # Not in a hold_opened written before it recorded them: then not compared.
        if "cause_key" in ev.data:
            values["cause_key"] = ev.data["cause_key"]
        if "deadline" in ev.data:
            values["deadline"] = time_of_data(ev.data["deadline"])
        self.holds[ev.hold_id] = Projected(ev.hold_id, values, ev.seq)

    def _hold_change(self, ev: EventRow) -> None:
        if ev.kind != "hold_resolved" and ev.kind not in _HOLD_CHANGES:
            return
        hold = self.holds.get(ev.hold_id or 0)
        if hold is None:
            self.problems.append((ev.seq, f"{ev.kind} concerns hold {ev.hold_id}, never opened"))
            return
        values = hold.values
        values["version"] += 1
        if ev.kind == "hold_resolved":
            values.update(
                resolved_at=ev.at,
                resolved_by=ev.actor,
                resolution=ev.data.get("resolution"),
                resolution_note=ev.data.get("note"),
            )
            return
        for name in ("owner", "next_action"):
            if name in ev.data:
                values[name] = ev.data[name]
        if ev.kind == "hold_evidence" and "detail" in values:
            values["detail"] = with_evidence(values["detail"], ev.data["evidence"])
        if "deadline" in ev.data:
            values["deadline"] = time_of_data(ev.data["deadline"])

    def _hold_resolved(self, ev: EventRow) -> None:
        """A person's decision changes the operation once, at its first event."""
        resolution = ev.data.get("resolution")
        key = ev.operation_id or ""
        previous = self._decision.get(key)
        if resolution not in _DECISIONS and resolution != Resolution.CAUSE_RESOLVED:
            return
        self._decision[key] = (ev.seq, ev.at, ev.actor)
        if resolution == Resolution.CAUSE_RESOLVED:
            return
        if previous is not None and previous == (ev.seq - 1, ev.at, ev.actor):
            return  # a further hold closed by the same decision
        op = self._op(ev)
        if op is None:
            return
        dispatching = op["state"] == State.DISPATCHING.value
        if resolution == Resolution.CONFIRMED_WITH_EVIDENCE:
            if dispatching:
                self._end_attempt(ev, op, "confirmed", None)
            op.update(state=State.CONFIRMED.value, receipt=ev.data.get("receipt"))
            self._receipt(ev, op, "evidence", execution_id=None, detail=ev.data.get("note"))
        elif resolution == Resolution.RELEASED_FOR_RETRY:
            if dispatching:
                self._end_attempt(ev, op, "released", None)
            op.update(state=State.PREPARED.value, execution_id=None, run_index=None, deadline=None)
        elif resolution == Resolution.REAPPROVED:
            approval = ev.data["approval"]
            op["reapproved_version"] = approval["version"]
            op["reapproved_until"] = time_of_data(approval["expires_at"])
        elif resolution == Resolution.ATTEMPT_ALLOWED:
            op["max_attempts"] = ev.data["max_attempts"]
        else:
            op["state"] = State.CANCELLED.value
        op["updated_at"] = ev.at


_HANDLERS = {
    "prepared": Projection._prepared,
    "dispatch_held": Projection._held,
    "dispatched": Projection._dispatched,
    "confirmed": Projection._confirmed,
    "receipt_conflict": Projection._receipt_conflict,
    "failed": Projection._failed,
    "failed_unknown": Projection._failed_unknown,
    "dispatch_released": Projection._released,
    "hold_opened": Projection._hold_opened,
    "hold_resolved": Projection._hold_resolved,
}
