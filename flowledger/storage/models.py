"""What the ledger stores: one SQLModel table per record kind.

The services write these tables through SQLAlchemy Core on ``Model.__table__`` (one round trip
per statement, no identity map on the hot path); the classes document the columns and give
typed rows to readers.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel

from flowledger.domain import limits

SCHEMA_VERSION = 10


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in Python; ``timestamptz`` on PostgreSQL, naive UTC text on SQLite
    (which has no time zones, and sorts ISO text correctly). The writer's raw SQL binds times
    through this same type (:func:`time_binder`) and reads them with :func:`from_db_time`, so a
    time has one stored form whichever way it was written."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the ledger; pass an aware UTC time")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> datetime | None:
        return from_db_time(value)

    def result_processor(self, dialect: sa.Dialect, coltype: Any) -> Any:
        """On SQLite the stored text straight to an aware time (``fromisoformat``, in C), as
        :func:`from_db_time` reads it for SQL written by hand: SQLAlchemy's own processor
        parses it with a regular expression first, and the sweep reads one or two a hold
        (bench/README.md, "Storage")."""
        if dialect.name == "sqlite":
            return from_db_time
        return super().result_processor(dialect, coltype)


def time_binder(dialect: sa.Dialect) -> Callable[[datetime | None], Any]:
    """What :class:`UTCDateTime` hands the driver for a time, for SQL written by hand.

    On SQLite the same text, made by ``isoformat`` in C: SQLAlchemy's own processor (a naive
    copy, then ``%``-formatting a dict) showed in a sync backfill, which binds two times a row
    (bench/README.md, "Storage"); ``tests/unit/test_time_binder.py`` holds the two equal."""
    if dialect.name == "sqlite":
        return _sqlite_time
    process = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
    return process if process is not None else (lambda value: value)


def _sqlite_time(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is UTC:
        # The usual case (the writer's times are UTC already): the aware text without its
        # "+00:00", cheaper than a converted naive copy (bench/README.md, "Storage").
        return value.isoformat(" ", "microseconds")[:-6]
    if value.tzinfo is None:
        raise ValueError("naive datetime given to the ledger; pass an aware UTC time")
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def from_db_time(value: Any) -> datetime | None:
    """A stored time as an aware UTC ``datetime``, from the driver's value (text on SQLite when
    read by hand, a ``datetime`` otherwise)."""
    if value is None:
        return None
    if isinstance(value, str):
        if len(value) in _NAIVE_LENGTHS:
            # As SQLite keeps them (naive UTC, with or without microseconds): read with the
            # offset appended, cheaper than a parse and then ``replace``. A text that had an
            # offset of its own has two now, which no parse accepts.
            try:
                return datetime.fromisoformat(value + "+00:00")
            except ValueError:
                pass
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


_NAIVE_LENGTHS = (len("2026-01-01 00:00:00.000000"), len("2026-01-01 00:00:00"))


def _ts(**kw: Any) -> Any:
    return Field(sa_type=UTCDateTime, **kw)


ID = limits.MAX_ID_LENGTH  # every id and name column


class LedgerMeta(SQLModel, table=True):
    """Key/value facts about the database itself; ``schema_version`` lives here."""

    __tablename__ = "ledger_meta"
    key: str = Field(primary_key=True, max_length=64)
    value: str = Field(max_length=400)


class Operation(SQLModel, table=True):
    """One business side effect, named by the workflow; ``version`` is the compare-and-set
    counter every state change bumps."""

    __tablename__ = "operations"
    __table_args__ = (
        # The sweep walks each state in (time, operation_id) order, a batch after another
        # from where the last one ended: the id makes the order total, so the walk never
        # reads again what it has passed.
        sa.Index("ix_operations_state_deadline_id", "state", "deadline", "operation_id"),
        sa.Index("ix_operations_state_updated_id", "state", "updated_at", "operation_id"),
        # The sweep's failed-execution rule starts from the few failed executions and finds
        # their operations in flight here; without it PostgreSQL read every operation
        # (bench/README.md, "Sweep").
        sa.Index(
            "ix_operations_dispatching_execution",
            "execution_id",
            sqlite_where=sa.text("state = 'dispatching'"),
            postgresql_where=sa.text("state = 'dispatching'"),
        ),
    )
    operation_id: str = Field(primary_key=True, max_length=ID)
    state: str = Field(max_length=16)
    input_hash: str = Field(max_length=80)
    processing_version: str = Field(max_length=ID)
    attempt: int = 0
    max_attempts: int = 5
    execution_id: str | None = Field(default=None, max_length=ID)
    run_index: int | None = None
    workflow_id: str | None = Field(default=None, max_length=ID)
    step: str | None = Field(default=None, max_length=ID)
    source: str | None = Field(default=None, max_length=ID)
    input_ref: str | None = Field(default=None, max_length=limits.MAX_INPUT_REF_LENGTH)
    approval_version: str | None = Field(default=None, max_length=ID)
    approval_expires_at: datetime | None = _ts(default=None)
    # A person's approval, standing in for a dispatch's that expired or names another version.
    reapproved_version: str | None = Field(default=None, max_length=ID)
    reapproved_until: datetime | None = _ts(default=None)
    receipt: str | None = Field(default=None, max_length=limits.MAX_RECEIPT_LENGTH)
    deadline: datetime | None = _ts(default=None)
    version: int = 0
    created_at: datetime = _ts()
    updated_at: datetime = _ts()
    # The last execution that dispatched the operation, whatever it was answered, its workflow
    # and when it was first seen; and the execution recorded as its twin
    # (:mod:`flowledger.domain.twins`). Not versioned: a dispatch answered skip or hold
    # updates them without changing the operation.
    last_execution_id: str | None = Field(default=None, max_length=ID)
    last_workflow_id: str | None = Field(default=None, max_length=ID)
    last_dispatched_at: datetime | None = _ts(default=None)
    twin_execution_id: str | None = Field(default=None, max_length=ID)


class Attempt(SQLModel, table=True):
    """One dispatch of an operation, tied to the execution that made it."""

    __tablename__ = "attempts"
    __table_args__ = (sa.UniqueConstraint("operation_id", "number"),)
    id: int | None = Field(default=None, primary_key=True)
    operation_id: str = Field(foreign_key="operations.operation_id", max_length=ID)
    number: int
    execution_id: str = Field(max_length=ID, index=True)
    run_index: int | None = None
    workflow_id: str | None = Field(default=None, max_length=ID)
    step: str | None = Field(default=None, max_length=ID)
    source: str | None = Field(default=None, max_length=ID)
    dispatched_at: datetime = _ts()
    deadline: datetime | None = _ts(default=None)
    outcome: str = Field(default="dispatching", max_length=32)
    ended_at: datetime | None = _ts(default=None)
    error: str | None = Field(default=None, max_length=limits.MAX_ERROR_LENGTH)


class Receipt(SQLModel, table=True):
    """The target system's reference for an effect, and who vouched for it."""

    __tablename__ = "receipts"
    id: int | None = Field(default=None, primary_key=True)
    operation_id: str = Field(foreign_key="operations.operation_id", max_length=ID, index=True)
    attempt: int
    receipt: str = Field(max_length=limits.MAX_RECEIPT_LENGTH)
    execution_id: str | None = Field(default=None, max_length=ID)
    confirmed_at: datetime = _ts()
    confirmed_by: str = Field(max_length=ID)
    kind: str = Field(default="workflow", max_length=16)  # workflow | evidence | conflict
    detail: str | None = Field(default=None, max_length=limits.MAX_DETAIL_LENGTH)


class Hold(SQLModel, table=True):
    """An attention item; a blocking one makes every dispatch of its operation answer hold.
    ``cause_key`` is unique so that each cause opens at most one hold."""

    __tablename__ = "holds"
    __table_args__ = (
        sa.Index("ix_holds_open_deadline", "resolved_at", "deadline"),
        # The metric of twin triggers sums these holds' counts at each scrape.
        sa.Index(
            "ix_holds_duplicate_trigger",
            "source",
            sqlite_where=sa.text("reason = 'duplicate_trigger'"),
            postgresql_where=sa.text("reason = 'duplicate_trigger'"),
        ),
    )
    id: int | None = Field(default=None, primary_key=True)
    cause_key: str = Field(max_length=600, unique=True)
    reason: str = Field(max_length=40)
    blocking: bool = False
    operation_id: str | None = Field(
        default=None, foreign_key="operations.operation_id", max_length=ID, index=True
    )
    execution_id: str | None = Field(default=None, max_length=ID)
    source: str | None = Field(default=None, max_length=ID)
    detail: str = Field(default="", max_length=limits.MAX_HOLD_DETAIL_LENGTH)
    opened_at: datetime = _ts()
    deadline: datetime = _ts()
    owner: str | None = Field(default=None, max_length=ID)
    next_action: str | None = Field(default=None, max_length=limits.MAX_NEXT_ACTION_LENGTH)
    resolved_at: datetime | None = _ts(default=None)
    resolved_by: str | None = Field(default=None, max_length=ID)
    resolution: str | None = Field(default=None, max_length=40)
    resolution_note: str | None = Field(default=None, max_length=limits.MAX_NOTE_LENGTH)
    version: int = 0
    # How many causes it counts: a ``duplicate_trigger`` hold counts every twin of its
    # workflow that day (after it was resolved too); every other hold one.
    occurrences: int = Field(default=1, sa_column_kwargs={"server_default": "1"})


class Event(SQLModel, table=True):
    """Append-only and hash-chained: ``hash = sha256(prev_hash ‖ canonical event)``. Triggers
    refuse UPDATE and DELETE."""

    __tablename__ = "events"
    seq: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    at: datetime = _ts()
    actor: str = Field(max_length=ID)
    kind: str = Field(max_length=40)
    operation_id: str | None = Field(default=None, max_length=ID, index=True)
    hold_id: int | None = None
    data: str = Field(default="{}", sa_type=sa.Text)
    prev_hash: str = Field(max_length=64)
    hash: str = Field(max_length=64)


class ChainHead(SQLModel, table=True):
    """The last event's sequence number and hash, kept in one row that every writer locks:
    it serialises appends and lets ``verify`` notice a deleted tail. Writers take it with the
    last statement of a transaction (on PostgreSQL, the one sent with the COMMIT)."""

    __tablename__ = "chain_head"
    id: int = Field(default=1, primary_key=True, sa_column_kwargs={"autoincrement": False})
    seq: int = 0
    hash: str = Field(max_length=64)


class MerkleNode(SQLModel, table=True):
    """A perfect subtree of the Merkle tree over the events (:mod:`flowledger.domain.merkle`):
    the hash of leaves ``idx * 2**level`` to ``(idx + 1) * 2**level - 1``, written with the
    event that completes it; level 1 and up (a leaf is the hash of its event's ``hash``).
    Append-only, like the events."""

    __tablename__ = "merkle_nodes"
    __table_args__ = {"sqlite_with_rowid": False}
    level: int = Field(primary_key=True, sa_type=sa.SmallInteger)
    idx: int = Field(primary_key=True, sa_type=sa.BigInteger)
    hash: bytes = Field(sa_type=sa.LargeBinary(32))


class Source(SQLModel, table=True):
    """A configured workflow-tool instance and where its sync stands."""

    __tablename__ = "sources"
    name: str = Field(primary_key=True, max_length=ID)
    kind: str = Field(max_length=40)
    base_url: str | None = Field(default=None, max_length=1000)
    position: str | None = Field(default=None, max_length=4000)
    last_sync_at: datetime | None = _ts(default=None)
    last_success_at: datetime | None = _ts(default=None)
    last_error: str | None = Field(default=None, max_length=2000)
    last_error_at: datetime | None = _ts(default=None)
    status: str = Field(default="ok", max_length=16)  # new (never synced), ok, error, stopped
    # When the ledger first saw it (a sync or the sweep): "stale" counts from here until a
    # first successful sync.
    first_seen_at: datetime | None = _ts(default=None)


class Execution(SQLModel, table=True):
    """The ledger's copy of one execution record; kept after the tool prunes it."""

    __tablename__ = "executions"
    __table_args__ = (
        sa.UniqueConstraint("source", "external_id"),
        sa.Index("ix_executions_final_status_started", "final", "status", "started_at", "id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(max_length=ID)
    external_id: str = Field(max_length=ID, index=True)
    workflow_id: str | None = Field(default=None, max_length=ID)
    workflow_name: str | None = Field(default=None, max_length=400)
    status: str = Field(max_length=32)
    mode: str | None = Field(default=None, max_length=32)
    final: bool = False
    started_at: datetime | None = _ts(default=None)
    stopped_at: datetime | None = _ts(default=None)
    retry_of: str | None = Field(default=None, max_length=ID)
    retry_success_id: str | None = Field(default=None, max_length=ID)
    wait_till: datetime | None = _ts(default=None)
    extra: str | None = Field(default=None, max_length=8000)
    first_seen_at: datetime = _ts()
    last_seen_at: datetime = _ts()
    gone_at: datetime | None = _ts(default=None)


# Executions are listed most recently started first (queued ones by when the ledger first saw
# them), keyset paged on (that time, id): this index is that order, so a page reads a page.
sa.Index(
    "ix_executions_started",
    sa.func.coalesce(Execution.__table__.c.started_at, Execution.__table__.c.first_seen_at),  # type: ignore[attr-defined]
    Execution.__table__.c.id,  # type: ignore[attr-defined]
)


class IdempotencyKey(SQLModel, table=True):
    """A stored answer for a client's ``Idempotency-Key``, per token."""

    __tablename__ = "idempotency_keys"
    token_id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    key: str = Field(primary_key=True, max_length=ID)
    request_hash: str = Field(max_length=80)
    status: str = Field(default="in_flight", max_length=16)
    response_status: int | None = None
    response_body: str | None = Field(default=None, sa_type=sa.Text)
    created_at: datetime = _ts()
    expires_at: datetime = _ts(index=True)


class SeenSignature(SQLModel, table=True):
    """A request signature the receiver accepted, kept until its timestamp leaves the window,
    so that the same signed request is accepted once (by any receiver on the database)."""

    __tablename__ = "seen_signatures"
    signature: str = Field(primary_key=True, max_length=64)  # the hex HMAC-SHA256
    expires_at: datetime = _ts(index=True)


class ApiToken(SQLModel, table=True):
    """A bearer token, stored only as its SHA-256; shown once when created."""

    __tablename__ = "api_tokens"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=ID, unique=True)
    scope: str = Field(max_length=16)
    token_hash: str = Field(max_length=64, unique=True)
    signing_secret: str | None = Field(default=None, max_length=128)
    created_at: datetime = _ts()
    last_used_at: datetime | None = _ts(default=None)
    revoked_at: datetime | None = _ts(default=None)


class Outbox(SQLModel, table=True):
    """An alert to deliver, written with the change that caused it; ``delivery_id`` is stable
    so that a receiver can drop a duplicate."""

    __tablename__ = "outbox"
    id: int | None = Field(default=None, primary_key=True)
    delivery_id: str = Field(max_length=80, unique=True)
    kind: str = Field(max_length=40)
    payload: str = Field(sa_type=sa.Text)
    created_at: datetime = _ts()
    attempts: int = 0
    next_attempt_at: datetime = _ts(index=True)
    delivered_at: datetime | None = _ts(default=None)
    last_error: str | None = Field(default=None, max_length=2000)


class Lease(SQLModel, table=True):
    """Which process runs the scheduled jobs; the holder renews ``expires_at``."""

    __tablename__ = "leases"
    name: str = Field(primary_key=True, max_length=64)
    holder: str = Field(max_length=200)
    expires_at: datetime = _ts()


def table(model: type[SQLModel]) -> sa.Table:
    return model.__table__  # type: ignore[attr-defined]
