"""Acting back on the workflow tool from the queues written with holds and releases
(:mod:`flowledger.storage.acting`): pin the execution a hold is about, so the tool's pruning
keeps it; run again the execution a person released with ``--retry``.

Never in a hold's or an operation's transaction, and never blocking one: a tool that is down,
slow or refusing leaves its row for later with a doubling backoff (``attempts``,
``next_attempt_at``, ``last_error``). Each pin made and each retry done is an event.

A retry is never made twice. The row is marked *called* and committed before n8n is called
(crash point ``after_retry_claimed``); a row found called but not done — the process died, or
the answer was lost — is first looked up in n8n (an execution whose ``retryOf`` is the one
retried) and recorded from there, and n8n is called again only when it has none. A
connection that was never made clears the mark. n8n refusing (409 for an execution queued,
aborted or succeeded; 404 gone; 403 a missing scope) ends the row with n8n's reason: the
release stands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx

from flowledger.config import SourceConfig
from flowledger.connectors.base import ConnectorError, NoConnection, clean_text
from flowledger.connectors.n8n_actions import N8nActions, Refused
from flowledger.plumbing.faults import crashpoint
from flowledger.scheduled.alerts import backoff
from flowledger.services.ledger import Ledger
from flowledger.storage import acting
from flowledger.sync.connect import connector_settings, make_client, scrub

log = logging.getLogger(__name__)
ACTOR = "scheduler:acting"
MAX_BACKOFF = timedelta(minutes=30)
CALL_MARGIN = timedelta(minutes=1)  # past a call's timeouts, before another may look for it
ACTING_KINDS = ("n8n",)


class NotActing(ConnectorError):
    """The execution is not one the ledger can act on (not an n8n source's): for good."""


@dataclass(frozen=True)
class Done:
    pinned: int = 0
    pins_waiting: int = 0
    retried: int = 0
    refused: int = 0
    retries_waiting: int = 0


@dataclass(frozen=True)
class RetryOutcome:
    """What became of one retry, said in one line (``outcome``: retried, refused, waiting)."""

    outcome: str
    line: str
    new_execution_id: str | None = None


class Acting:
    """Drains the pin and retry queues. ``client_for`` makes the HTTP client of a source
    (tests pass one over ``httpx.MockTransport``)."""

    def __init__(
        self,
        ledger: Ledger,
        sources: Sequence[SourceConfig],
        *,
        client_for: Callable[[SourceConfig], httpx.Client] = make_client,
        batch: int = 100,
        max_backoff: timedelta = MAX_BACKOFF,
    ) -> None:
        self.ledger = ledger
        self.sources = {s.name: s for s in sources if s.kind in ACTING_KINDS}
        self.kinds = {s.name: s.kind for s in sources}
        self.client_for = client_for
        self.batch = batch
        self.max_backoff = max_backoff

    @property
    def now(self) -> datetime:
        return self.ledger.clock()

    def run(self) -> Done:
        pinned, pins_waiting = self.pin_due()
        retried, refused, waiting = self.retry_due()
        if pinned or retried or refused:
            log.info("acting: %d pinned, %d retried, %d refused", pinned, retried, refused)
        return Done(pinned, pins_waiting, retried, refused, waiting)

    # ------------------------------------------------------------------ sources

    def source_for(self, named: str | None, execution_id: str) -> SourceConfig:
        """The configured n8n source an execution belongs to: the one named, else the only
        one, else the one whose kept copies have it."""
        if named is not None:
            found = self.sources.get(named)
            if found is None and named in self.kinds:
                raise NotActing(
                    f"source {named} is of kind {self.kinds[named]}: the ledger retries and pins "
                    "n8n executions only"
                )
            if found is None:
                raise ConnectorError(f"source {named!r} is not a configured n8n source")
            return found
        if not self.sources:
            raise NotActing("no n8n source is configured")
        if len(self.sources) == 1:
            return next(iter(self.sources.values()))
        with self.ledger.store.reader.connect() as conn:
            name = acting.source_of_copy(conn, sorted(self.sources), execution_id)
        if name is None:
            raise ConnectorError(
                f"no configured n8n source has a copy of execution {execution_id} yet"
            )
        return self.sources[name]

    def _actions(self, src: SourceConfig) -> tuple[N8nActions, httpx.Client]:
        client = self.client_for(src)
        try:
            return N8nActions(client, connector_settings(src)), client
        except Exception:
            client.close()
            raise

    # ------------------------------------------------------------------ pins

    def pin_due(self) -> tuple[int, int]:
        """Pin every execution due now; returns (pinned, left to try later)."""
        pinned = waiting = 0
        while True:
            with self.ledger.store.reader.connect() as conn:
                rows = acting.due_pins(conn, self.now, self.batch)
            for row in rows:
                if self._pin(row):
                    pinned += 1
                else:
                    waiting += 1
            if len(rows) < self.batch:
                return pinned, waiting

    def _pin(self, row: Any) -> bool:
        src: SourceConfig | None = None
        try:
            src = self.source_for(row.source, row.execution_id)
            if not src.pin_evidence:
                raise ConnectorError(f"source {src.name} has pin_evidence = false")
            actions, client = self._actions(src)
            try:
                note = actions.pin(row.execution_id, src.pin_tag_id)
            finally:
                client.close()
        except ConnectorError as exc:
            error = clean_text(exc, 300) if src is None else scrub(clean_text(exc, 300), src)
            attempts = row.attempts + 1
            with self.ledger.store.engine.begin() as conn:
                at = self.now + backoff(attempts, self.max_backoff)
                acting.pin_later(conn, row.id, attempts=attempts, at=at, error=error,
                                 source=None if src is None else src.name)  # fmt: skip
            if error != row.last_error:  # once a change, not every tick
                log.warning("acting: the pin of execution %s (hold %d) waits: %s",
                            row.execution_id, row.hold_id, error)  # fmt: skip
            return False
        if row.last_error is not None:
            log.info("acting: execution %s (hold %d) pinned after %d attempts",
                     row.execution_id, row.hold_id, row.attempts + 1)  # fmt: skip
        with self.ledger.transaction(ACTOR) as tx:
            assert src is not None
            if acting.mark_pinned(tx.conn, row.id, src.name, tx.now):
                data: dict[str, Any] = {"source": src.name, "execution_id": row.execution_id}
                if src.pin_tag_id and note is None:
                    data["tag_id"] = src.pin_tag_id
                if note is not None:
                    data["note"] = note
                tx.event("execution_pinned", row.operation_id, data, hold_id=row.hold_id)
        return True

    # ------------------------------------------------------------------ retries

    def retry_due(self) -> tuple[int, int, int]:
        """Make every retry due now; returns (retried, refused, left to try later)."""
        counts = {"retried": 0, "refused": 0, "waiting": 0}
        while True:
            with self.ledger.store.reader.connect() as conn:
                rows = acting.due_retries(conn, self.now, self.batch)
            for row in rows:
                counts[self._retry(row).outcome] += 1
            if len(rows) < self.batch:
                return counts["retried"], counts["refused"], counts["waiting"]

    def retry_hold(self, hold_id: int, actor: str = ACTOR) -> RetryOutcome | None:
        """Make the retry asked for ``hold_id`` now, if it is not done (``None`` when none
        was asked); what ``hold ID release --retry`` says once the release is recorded.
        ``actor``: who makes the call, recorded on its event (the operator, from the CLI)."""
        with self.ledger.store.reader.connect() as conn:
            row = acting.retry_row(conn, hold_id)
        if row is None:
            return None
        if row.done_at is not None:
            return _said_done(row)
        if row.called_at is not None and row.next_attempt_at > self.now:
            return RetryOutcome("waiting", "the retry is being made by the scheduler")
        return self._retry(row, actor)

    def _retry(self, row: Any, actor: str = ACTOR) -> RetryOutcome:
        called = row.called_at is not None
        try:
            src = self.source_for(row.source, row.execution_id)
            actions, client = self._actions(src)
        except NotActing as exc:
            return self._refused(row, row.source, str(exc), actor)
        except ConnectorError as exc:
            return self._later(row, clean_text(exc, 300), called=called)
        try:
            if called:
                # It may have reached n8n before: find what it made there, never make two.
                found = actions.retry_of(row.execution_id)
                if found is not None:
                    how = "found in n8n after an unfinished call"
                    return self._retried(row, src, found, how, actor)
            now = self.now
            busy = now + src.connect_timeout + src.timeout + CALL_MARGIN
            with self.ledger.store.engine.begin() as conn:
                if not acting.claim_retry(conn, row.id, now, row.called_at, busy):
                    return RetryOutcome("waiting", "the retry is being made by another process")
            crashpoint("after_retry_claimed")
            try:
                new = actions.retry(row.execution_id)
            except Refused as exc:
                return self._refused(row, src.name, scrub(str(exc), src), actor)
            except NoConnection as exc:  # never reached n8n: nothing to look for next time
                return self._later(row, scrub(clean_text(exc, 300), src), called=False, src=src)
            crashpoint("after_retry_called")
            return self._retried(row, src, new["id"], None, actor)
        except Refused as exc:
            return self._later(row, scrub(str(exc), src), called=True, src=src)
        except ConnectorError as exc:
            return self._later(row, scrub(clean_text(exc, 300), src), called=True, src=src)
        finally:
            client.close()

    def _retried(
        self, row: Any, src: SourceConfig, new_id: str, how: str | None, actor: str
    ) -> RetryOutcome:
        with self.ledger.transaction(actor) as tx:
            if acting.finish_retry(
                tx.conn, row.id, at=tx.now, outcome="retried", new_execution_id=new_id, error=None
            ):
                data = {"source": src.name, "execution_id": row.execution_id,
                        "new_execution_id": new_id, "asked_by": row.asked_by}  # fmt: skip
                if how is not None:
                    data["note"] = how
                tx.event("execution_retried", row.operation_id, data, hold_id=row.hold_id)
        return RetryOutcome(
            "retried",
            f"n8n is running execution {row.execution_id} again as execution {new_id}",
            new_id,
        )

    def _refused(self, row: Any, source: str | None, reason: str, actor: str) -> RetryOutcome:
        with self.ledger.transaction(actor) as tx:
            if acting.finish_retry(
                tx.conn, row.id, at=tx.now, outcome="refused", new_execution_id=None, error=reason
            ):
                data = {"source": source, "execution_id": row.execution_id, "reason": reason}
                tx.event("retry_refused", row.operation_id, data, hold_id=row.hold_id)
                log.warning("acting: n8n refused the retry of execution %s (hold %d): %s",
                            row.execution_id, row.hold_id, reason)  # fmt: skip
        return RetryOutcome("refused", reason)

    def _later(
        self, row: Any, error: str, *, called: bool, src: SourceConfig | None = None
    ) -> RetryOutcome:
        attempts = max(row.attempts, 1)
        at = self.now + backoff(attempts, self.max_backoff)
        source = None if src is None else src.name
        with self.ledger.store.engine.begin() as conn:
            acting.retry_later(conn, row.id, at=at, error=error, called=called, source=source)
        if error != row.last_error:  # once a change, not every tick
            log.warning("acting: the retry of execution %s (hold %d) waits: %s",
                        row.execution_id, row.hold_id, error)  # fmt: skip
        return RetryOutcome("waiting", f"the retry will be tried again: {error}")


def _said_done(row: Any) -> RetryOutcome:
    if row.outcome == "retried":
        return RetryOutcome(
            "retried",
            f"execution {row.execution_id} was retried already as execution {row.new_execution_id}",
            row.new_execution_id,
        )
    return RetryOutcome("refused", row.last_error or "n8n refused the retry")


def delete_pinned(
    ledger: Ledger, src: SourceConfig, execution_ids: Sequence[str], operator: str,
    client: httpx.Client | None = None,
) -> list[tuple[str, str]]:  # fmt: skip
    """Delete in n8n the pinned executions a person chose (of resolved holds only), each
    with an ``execution_deleted`` event; ``(execution id, what happened)`` for each."""
    own = client is None
    client = client or make_client(src)
    actions = N8nActions(client, connector_settings(src))
    said: list[tuple[str, str]] = []
    try:
        for execution_id in execution_ids:
            try:
                existed = actions.delete(execution_id)
            except ConnectorError as exc:
                said.append((execution_id, f"not deleted: {scrub(clean_text(exc, 300), src)}"))
                continue
            with ledger.transaction(f"operator:{operator}") as tx:
                # One event for each operation the execution was pinned for, with its hold,
                # so that `show` of the operation has it.
                for operation_id, holds in acting.mark_deleted(
                    tx.conn, src.name, execution_id, tx.now
                ):
                    data: dict[str, Any] = {"source": src.name, "execution_id": execution_id,
                                            "existed": existed}  # fmt: skip
                    if len(holds) > 1:
                        data["hold_ids"] = holds
                    tx.event("execution_deleted", operation_id, data, hold_id=holds[0])
            said.append((execution_id, "deleted" if existed else "was gone already"))
    finally:
        if own:
            client.close()
    return said
