"""``flowledger verify --deep``: the tables against a replay of the event chain.

The chain walk (:mod:`flowledger.storage.reads.chain`) proves the events were not changed;
this proves the tables say what the events say. A forged ``UPDATE operations SET state =
'confirmed'`` leaves the chain whole, and ``show`` would print the forgery; the replay names
the row and column.

Memory stays bounded by a batch, not by the ledger: the operations are taken a range of ids at
a time (the events' and the table's ids merged in order, ``batch`` of each at most), and for
each range the events of those operations are replayed (through the index on
``events.operation_id``) and compared with that range's operations, attempts, receipts and
holds. Holds that concern no operation (a stale source, a stuck execution) are replayed in one
last pass. What a replay cannot rebuild is listed in :mod:`flowledger.domain.projection`.
Each range is read as ``low < operation_id <= high``, ``None`` an open end.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from flowledger.domain.projection import EventRow, Projected, Projection
from flowledger.storage.models import Attempt, Event, Hold, Operation, Receipt, table
from flowledger.storage.reads import Connection
from flowledger.storage.reads.token_check import token_findings

EVENTS = table(Event)
OPS = table(Operation)
ATTEMPTS = table(Attempt)
RECEIPTS = table(Receipt)
HOLDS = table(Hold)


def _between(column: Any, low: str | None, high: str | None) -> sa.ColumnElement[bool]:
    """``low < column <= high``; ``None`` leaves that end open (but never lets NULL in)."""
    conds = [column.is_not(None)]
    if low is not None:
        conds.append(column > low)
    if high is not None:
        conds.append(column <= high)
    return sa.and_(*conds)


def _first_ids(conn: Connection, column: Any, low: str | None, batch: int) -> list[str]:
    stmt = sa.select(column).where(_between(column, low, None)).distinct()
    return list(conn.execute(stmt.order_by(column).limit(batch)).scalars().all())


def event_operation_ids(conn: Connection, low: str | None, batch: int) -> list[str]:
    """The first ``batch`` operation ids after ``low`` that events name, in order."""
    return _first_ids(conn, EVENTS.c.operation_id, low, batch)


def operation_ids(conn: Connection, low: str | None, batch: int) -> list[str]:
    """The first ``batch`` ids of the operations table after ``low``, in order."""
    return _first_ids(conn, OPS.c.operation_id, low, batch)


def events_between(conn: Connection, low: str | None, high: str | None) -> Iterator[Any]:
    """The events of the operations in the range, in chain order."""
    where = _between(EVENTS.c.operation_id, low, high)
    return iter(conn.execute(sa.select(EVENTS).where(where).order_by(EVENTS.c.seq)))


def events_of_unowned_holds(conn: Connection) -> Iterator[Any]:
    """The events about holds that concern no operation, in chain order."""
    where = sa.and_(EVENTS.c.operation_id.is_(None), EVENTS.c.hold_id.is_not(None))
    return iter(conn.execute(sa.select(EVENTS).where(where).order_by(EVENTS.c.seq)))


def operations_between(conn: Connection, low: str | None, high: str | None) -> list[Any]:
    return list(conn.execute(sa.select(OPS).where(_between(OPS.c.operation_id, low, high))))


def attempts_between(conn: Connection, low: str | None, high: str | None) -> Iterator[Any]:
    where = _between(ATTEMPTS.c.operation_id, low, high)
    return iter(conn.execute(sa.select(ATTEMPTS).where(where)))


def receipts_between(conn: Connection, low: str | None, high: str | None) -> Iterator[Any]:
    where = _between(RECEIPTS.c.operation_id, low, high)
    return iter(conn.execute(sa.select(RECEIPTS).where(where).order_by(RECEIPTS.c.id)))


def holds_between(conn: Connection, low: str | None, high: str | None) -> list[Any]:
    return list(conn.execute(sa.select(HOLDS).where(_between(HOLDS.c.operation_id, low, high))))


def holds_of_no_operation(conn: Connection) -> list[Any]:
    return list(conn.execute(sa.select(HOLDS).where(HOLDS.c.operation_id.is_(None))))


def holds_by_id(conn: Connection, hold_ids: Sequence[int]) -> list[Any]:
    return list(conn.execute(sa.select(HOLDS).where(HOLDS.c.id.in_(list(hold_ids)))))


@dataclass(frozen=True)
class Finding:
    """One difference: ``what`` names the row (``operation invoice:1``, ``hold 7``,
    ``attempt 2 of invoice:1``, ``receipt 5``), ``column`` the column (``None`` when the whole
    row is missing or extra), then the table's value and the events' value."""

    what: str
    column: str | None
    stored: Any = None
    expected: Any = None
    note: str = ""


@dataclass
class DeepResult:
    operations: int = 0
    holds: int = 0
    events: int = 0
    tokens: int = 0
    findings: list[Finding] = field(default_factory=list)
    more: int = 0  # findings past the limit, counted but not kept

    @property
    def ok(self) -> bool:
        return not self.findings


class _Collector:
    def __init__(self, result: DeepResult, limit: int) -> None:
        self.result, self.limit = result, limit

    def add(self, finding: Finding) -> None:
        if len(self.result.findings) < self.limit:
            self.result.findings.append(finding)
        else:
            self.result.more += 1


def deep_verify(conn: Connection, *, batch: int = 500, limit: int = 1000) -> DeepResult:
    """Replay the chain into a fresh projection and compare it with the tables; at most
    ``limit`` findings are kept (the rest counted)."""
    result = DeepResult()
    out = _Collector(result, limit)
    for low, high in _ranges(conn, batch):
        projection = Projection()
        result.events += _replay(projection, events_between(conn, low, high), out)
        result.operations += _compare_operations(conn, projection, low, high, out)
        _compare_attempts(conn, projection, low, high, out)
        _compare_receipts(conn, projection, low, high, out)
        result.holds += _compare_holds(conn, projection, holds_between(conn, low, high), out)
    projection = Projection()
    result.events += _replay(projection, events_of_unowned_holds(conn), out)
    result.holds += _compare_holds(conn, projection, holds_of_no_operation(conn), out)
    result.tokens = token_findings(
        conn,
        lambda what, column, stored, expected, note: out.add(
            Finding(what, column, stored, expected, note)
        ),
    )
    return result


def _ranges(conn: Connection, batch: int) -> Iterator[tuple[str | None, str | None]]:
    """Ranges of operation ids, each holding at most ``batch`` ids of the events and at most
    ``batch`` of the operations table: a merge of the two sorted lists, so an id on one side
    only (a row without events, events without a row) falls in a range like any other."""
    low: str | None = None
    while True:
        ids = [event_operation_ids(conn, low, batch), operation_ids(conn, low, batch)]
        if not ids[0] and not ids[1]:
            return
        full = [found[-1] for found in ids if len(found) == batch]
        if not full:
            yield low, None
            return
        high = min(full)
        yield low, high
        low = high


def _replay(projection: Projection, events: Iterable[Any], out: _Collector) -> int:
    count = 0
    for row in events:
        try:
            data = json.loads(row.data)
        except ValueError:
            out.add(Finding(f"event {row.seq}", "data", note="not valid JSON"))
            continue
        projection.apply(
            EventRow(row.seq, row.at, row.actor, row.kind, row.operation_id, row.hold_id, data)
        )
        count += 1
    for seq, problem in projection.problems:
        out.add(Finding(f"event {seq}", None, note=problem))
    return count


def _compare(
    what: str, stored: Any, expected: Projected | None, out: _Collector, *, kind: str
) -> None:
    """One row against its projection: a row no event made, a row missing, or the columns
    that differ."""
    if expected is None:
        out.add(Finding(what, None, note=f"no event records this {kind}"))
        return
    if stored is None:
        out.add(Finding(what, None, note=f"missing; event {expected.seq} records it"))
        return
    for column, have, value in _differences(stored, expected):
        out.add(Finding(what, column, have, value))


def _compare_operations(
    conn: Connection, projection: Projection, low: str | None, high: str | None, out: _Collector
) -> int:
    rows = operations_between(conn, low, high)
    seen = set()
    for row in rows:
        seen.add(row.operation_id)
        found = projection.operations.get(row.operation_id)
        _compare(f"operation {row.operation_id}", row, found, out, kind="operation")
    for op_id, expected in projection.operations.items():
        if op_id not in seen:
            _compare(f"operation {op_id}", None, expected, out, kind="operation")
    return len(rows)


def _compare_attempts(
    conn: Connection, projection: Projection, low: str | None, high: str | None, out: _Collector
) -> None:
    seen = set()
    for row in attempts_between(conn, low, high):
        key = (row.operation_id, row.number)
        seen.add(key)
        what = f"attempt {row.number} of {row.operation_id}"
        _compare(what, row, projection.attempts.get(key), out, kind="attempt")
    for (op_id, number), expected in projection.attempts.items():
        if (op_id, number) not in seen:
            _compare(f"attempt {number} of {op_id}", None, expected, out, kind="attempt")


def _compare_receipts(
    conn: Connection, projection: Projection, low: str | None, high: str | None, out: _Collector
) -> None:
    """Receipts have no key of their own. Per operation, each receipt the events record is
    matched with a stored row equal in every compared column; what is left on both sides is
    then paired in time order (then id, then sequence) and compared column by column. Matching
    by order alone would report a difference where two writers' receipts of one operation
    committed in the other order than their rows were numbered (PostgreSQL)."""
    stored: dict[str, list[Any]] = {}
    for row in receipts_between(conn, low, high):
        stored.setdefault(row.operation_id, []).append(row)
    for op_id in sorted(set(stored) | set(projection.receipts)):
        have = sorted(stored.get(op_id, []), key=lambda r: (r.confirmed_at, r.id))
        want = []
        for expected in sorted(
            projection.receipts.get(op_id, []), key=lambda p: (p.values["confirmed_at"], p.seq)
        ):
            same = next((r for r in have if _differences(r, expected) == []), None)
            if same is None:
                want.append(expected)
            else:
                have.remove(same)
        for n in range(max(len(have), len(want))):
            left = have[n] if n < len(have) else None
            what = f"receipt {left.id} of {op_id}" if left is not None else f"a receipt of {op_id}"
            _compare(what, left, want[n] if n < len(want) else None, out, kind="receipt")


def _differences(stored: Any, expected: Projected) -> list[tuple[str, Any, Any]]:
    """``(column, stored, expected)`` for each column the events determine and the row does
    not agree with."""
    found = []
    for column, value in expected.values.items():
        have = getattr(stored, column)
        if isinstance(value, bool):
            have = bool(have)
        if have != value:
            found.append((column, have, value))
    return found


def _compare_holds(
    conn: Connection, projection: Projection, rows: list[Any], out: _Collector
) -> int:
    """The holds of a range of operations (or of none) against the events about them. A hold
    the events open here but the table files under another operation is compared where it
    is, so the finding names its ``operation_id``."""
    seen = set()
    for row in rows:
        seen.add(row.id)
        expected = projection.holds.get(row.id)
        if expected is None:
            about = f"operation {row.operation_id}" if row.operation_id else "no operation"
            out.add(Finding(f"hold {row.id}", None, note=f"no event about {about} opened it"))
        else:
            _compare(f"hold {row.id}", row, expected, out, kind="hold")
    missing = sorted(set(projection.holds) - seen)
    elsewhere = {}
    if missing:
        elsewhere = {row.id: row for row in holds_by_id(conn, missing)}
    for hold_id in missing:
        stored = elsewhere.get(hold_id)
        _compare(f"hold {hold_id}", stored, projection.holds[hold_id], out, kind="hold")
    return len(rows)
