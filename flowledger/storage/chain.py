"""Appending a transaction's events to the hash chain, as its last statement.

Each event is sealed after the one before it (sha256 over the previous hash and the event's
canonical form, :mod:`flowledger.domain.chain`), and the chain head moves with the batch; the
Merkle tree over the events grows in the same transaction (:mod:`flowledger.storage.merkle`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from flowledger.domain.chain import event_time, sealed_prefix, sealed_tail
from flowledger.domain.hashing import canonical_json, seal
from flowledger.storage import merkle
from flowledger.storage.tx import PendingEvent, Tx

_ADVANCE_HEAD = "UPDATE chain_head SET seq = :seq, hash = :hash WHERE id = 1"
# SQLite: an event's values by position, in a tuple (:class:`SealedEvent`): bound by name, each
# parameter of each row is a name made into a string and looked up in the row's dict.
_INSERT_EVENT = (
    "INSERT INTO events (seq, at, actor, kind, operation_id, hold_id, data, prev_hash, hash)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

# PostgreSQL appends a transaction's events in ONE statement, sent with the COMMIT: it locks
# the head row, chains the batch after it (the last field of an event's canonical form, the
# sequence number, only the database knows by then), inserts the events and moves the head.
# The head is locked from this statement to the end of the commit, never across a wait for the
# client, so other receivers' batches do not queue on it (bench/README.md, "Write path").
_APPEND_EVENTS_PG = """
WITH RECURSIVE head AS (
    SELECT seq, hash FROM chain_head WHERE id = 1 FOR UPDATE
), forms AS (
    SELECT :form::bytea[] AS form
), chain (n, seq, prev_hash, hash) AS (
    SELECT 0::bigint, seq, NULL::text, hash::text FROM head
    UNION ALL
    SELECT c.n + 1, c.seq + 1, c.hash, encode(sha256(
        convert_to(c.hash, 'UTF8') || f.form[c.n + 1]
        || convert_to((c.seq + 1)::text || '}', 'UTF8')
    ), 'hex')
    FROM chain AS c, forms AS f
    WHERE c.n < cardinality(f.form)
), appended AS (
    INSERT INTO events (seq, at, actor, kind, operation_id, hold_id, data, prev_hash, hash)
    SELECT c.seq, b.at, b.actor, b.kind, b.operation_id, b.hold_id, b.data, c.prev_hash, c.hash
    FROM chain AS c JOIN unnest(
        :at::timestamptz[], :actor::text[], :kind::text[], :operation_id::text[],
        :hold_id::bigint[], :data::text[]
    ) WITH ORDINALITY AS b (at, actor, kind, operation_id, hold_id, data, n) USING (n)
)
UPDATE chain_head SET seq = last.seq, hash = last.hash
FROM (SELECT seq, hash FROM chain ORDER BY n DESC LIMIT 1) AS last
WHERE chain_head.id = 1
"""


class SealedEvent(NamedTuple):
    """An event as SQLite's append inserts it (:data:`_INSERT_EVENT`'s columns, in order)."""

    seq: int
    at: Any
    actor: str
    kind: str
    operation_id: str | None
    hold_id: int | None
    data: str
    prev_hash: str
    hash: str


def append_events(tx: Tx) -> None:
    """Chain the pending events of ``tx`` after the head, as the transaction's last statement.

    PostgreSQL: queued with the COMMIT that follows (see ``_APPEND_EVENTS_PG``), so the head
    row is held only while the server runs that statement and the commit.

    SQLite: ``BEGIN IMMEDIATE`` holds the database, the head with it. The update is a
    compare-and-set on the sequence number this process last wrote, and only when that is
    stale is the head read and the events sealed again."""
    if not tx.events:
        return
    if tx.dialect != "sqlite":
        _append_events_pg(tx)
        return
    hint = tx.chain_hint
    if hint.seq is not None:
        rows = _seal(tx, hint.seq, hint.hash)
        guess = {**_head(rows, hint.seq), "old_hash": hint.hash}
        if tx.update(_ADVANCE_HEAD + " AND seq = :old AND hash = :old_hash", guess) == 1:
            _insert_events(tx, rows)
            return
    head = tx.one("SELECT seq, hash FROM chain_head WHERE id = 1")
    assert head is not None
    rows = _seal(tx, int(head.seq), str(head.hash))
    tx.execute(_ADVANCE_HEAD, _head(rows, int(head.seq)))
    _insert_events(tx, rows)


def _append_events_pg(tx: Tx) -> None:
    columns: dict[str, list[Any]] = {
        k: [] for k in ("form", "at", "actor", "kind", "operation_id", "hold_id", "data")
    }
    for ev, data, form, at in _forms(tx):
        columns["form"].append(form)
        columns["at"].append(at)
        columns["actor"].append(ev.actor)
        columns["kind"].append(ev.kind)
        columns["operation_id"].append(ev.operation_id)
        columns["hold_id"].append(ev.hold_id)
        columns["data"].append(data)
    tx.pipeline()
    tx.execute(_APPEND_EVENTS_PG, columns, binary=True, prepare=True)
    tx.events.clear()


def _forms(tx: Tx) -> Iterator[tuple[PendingEvent, str, bytes, Any]]:
    """Each pending event with its data's canonical JSON, its sealed form up to the sequence
    number, and its time as bound to a statement. The transaction's events share its time,
    written and bound once."""
    now = event_time(tx.now)
    for ev in tx.events:
        data = canonical_json(ev.data).decode()
        mine = ev.at is tx.now
        form = sealed_prefix(
            ev.at, ev.actor, ev.kind, ev.operation_id, ev.hold_id, data,
            at_text=now if mine else None,
        )  # fmt: skip
        yield ev, data, form, tx.db_now if mine else tx.time(ev.at)


def _seal(tx: Tx, seq: int, prev: str) -> list[SealedEvent]:
    rows: list[SealedEvent] = []
    for ev, data, form, at in _forms(tx):
        seq += 1
        digest = seal(prev, form + sealed_tail(seq))
        row = SealedEvent(
            seq, at, ev.actor, ev.kind, ev.operation_id, ev.hold_id, data, prev, digest
        )
        rows.append(row)
        prev = digest
    return rows


def _head(rows: list[SealedEvent], old: int) -> dict[str, Any]:
    return {"seq": rows[-1].seq, "hash": rows[-1].hash, "old": old}


def _insert_events(tx: Tx, rows: list[SealedEvent]) -> None:
    if len(rows) == 1:  # the usual case; executemany costs more for a single row
        tx.execute(_INSERT_EVENT, rows[0])
    else:
        tx.many(_INSERT_EVENT, rows)
    merkle.extend(tx, rows)  # the tree's new leaves and subtrees (a trigger on PostgreSQL)
    # A guess until the commit; a rollback leaves it stale, and the next writer's
    # compare-and-set notices.
    tx.chain_hint.seq, tx.chain_hint.hash = rows[-1].seq, rows[-1].hash
    tx.events.clear()
