"""One sync of one source: new pages, then the non-final copies, then (when due) a walk of
everything the tool still holds to notice what it pruned.

Each page is written with the position that follows it in one transaction, so a crash (or a
kill) between pages resumes at the next page: no gap, no duplicate. A retryable error (429,
5xx, a network blip, a tool still starting) waits and resumes from the last stored position;
any other error stops the run, records a one-line reason on the source, and leaves everything
stored as it was.
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx

from flowledger.config import SourceConfig
from flowledger.connectors.base import (
    Connector,
    ConnectorError,
    ExecutionRecord,
    Page,
    Versions,
)
from flowledger.connectors.http import public_url
from flowledger.plumbing.faults import crashpoint
from flowledger.services.ledger import Ledger, Tx
from flowledger.storage import executions, sources
from flowledger.sync import connect, copies, versions
from flowledger.sync.retry import Backoff, Clock, Sleep

T = TypeVar("T")
REFRESH_LIMIT = 500
REFRESH_BATCH = 100
GONE_BATCH = 1000
GONE_CHECK_LIMIT = 500  # copies the walk did not see, asked for by id in one run
RECOVER_LIMIT = 500
# On PostgreSQL a run analyzes the copies once it has stored this many new ones, and again
# each time its count doubles: without statistics each page's lookup of its copies was
# planned as a scan of every copy of the source (bench/README.md, "Reads and sync").
ANALYZE_AFTER = 10_000


@dataclass
class SyncReport:
    """What one run did; ``error`` is the one-line reason it stopped, if it did."""

    source: str
    pages: int = 0
    new: int = 0
    changed: int = 0
    refreshed: int = 0
    gone: int = 0
    unchecked: int = 0  # copies the walk did not see and this run did not ask for by id
    linked: int = 0
    reconciled: bool = False
    recovered: int = 0
    versions_read: int = 0  # executions asked for by id for the workflow version they ran
    stale_versions: int = 0  # dispatches found made by an outdated workflow version
    waited: float = 0.0
    status: str = "ok"
    error: str | None = None
    total: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


Progress = Callable[[SyncReport], None]


class Superseded(ConnectorError):
    """Another sync of the same source moved its position while this one ran."""


def sync_source(
    ledger: Ledger,
    cfg: SourceConfig,
    client: httpx.Client | None = None,
    *,
    clock: Clock | None = None,
    sleep: Sleep = time.sleep,
    backoff: Backoff = Backoff(),
    reconcile: bool | None = None,
    progress: Progress | None = None,
) -> SyncReport:
    """Sync ``cfg`` once. ``reconcile``: ``None`` when due, ``True`` always, ``False`` never."""
    own = client is None
    client = client or connect.make_client(cfg)
    run = _Run(ledger, cfg, clock or ledger.clock, sleep, backoff, progress)
    try:
        run.go(client, reconcile)
    finally:
        if own:
            client.close()
    return run.report


class _Run:
    def __init__(
        self,
        ledger: Ledger,
        cfg: SourceConfig,
        clock: Clock,
        sleep: Sleep,
        backoff: Backoff,
        progress: Progress | None,
    ) -> None:
        self.ledger = ledger
        self.cfg = cfg
        self.clock = clock
        self.sleep = sleep
        self.backoff = backoff
        self.progress = progress
        self.actor = f"sync:{cfg.name}"
        self.report = SyncReport(cfg.name)
        self.envelope: dict[str, Any] = {}
        self.stored: str | None = None
        self.analyze_at = ANALYZE_AFTER
        self.versions = False  # executions linked by their dispatch are due for the check

    def go(self, client: httpx.Client, reconcile: bool | None) -> None:
        started = self.clock()
        with self.ledger.transaction(self.actor) as tx:
            row = sources.ensure_source(
                tx, self.cfg.name, self.cfg.kind, public_url(self.cfg.base_url)
            )
        self.stored = row.position
        self.envelope = _load_envelope(row.position)
        # Until a first backfill completes there is nothing to reconcile against: it ends by
        # setting reconciled_at.
        first_run = not self.envelope.get("reconciled_at")
        try:
            connector = connect.build_connector(self.cfg, client)
            self.versions = isinstance(connector, Versions) and self.cfg.version_reads > 0
            self._pages(connector)
            self._refresh(connector, started)
            if isinstance(connector, Versions) and self.versions:
                self._check_versions(connector)
            due = self._reconcile_due(started) if reconcile is None else reconcile
            if due and not first_run:
                self._reconcile(connector, started)
            if due or first_run:
                self.envelope["reconciled_at"] = started.astimezone(UTC).isoformat()
                with self.ledger.transaction(self.actor) as tx:
                    self._move(tx)
            self.report.notes.extend(connector.notes)
        except Superseded as exc:
            # The other run owns the source now, and records how it ends.
            self.report.error, self.report.status = str(exc), "superseded"
            return
        except ConnectorError as exc:
            self.report.error = connect.scrub(str(exc), self.cfg)
            self.report.status = "stopped" if exc.stops_source else "error"
        error = self.report.error
        with self.ledger.transaction(self.actor) as tx:
            sources.record_outcome(
                tx,
                self.cfg.name,
                status=self.report.status,
                error=None if error is None else self.ledger.redact(error),
            )

    def _move(self, tx: Tx) -> None:
        new = json.dumps(self.envelope)
        if not sources.save_position(tx, self.cfg.name, new, self.stored):
            raise Superseded(
                f"another sync of {self.cfg.name} moved its position meanwhile; this run "
                "stopped and left the rest to it"
            )
        self.stored = new

    # ------------------------------------------------------------------ retries

    def _retrying(self, call: Callable[[], T]) -> T:
        return self.backoff.retrying(self._sleep, self.clock)(call)

    def _sleep(self, seconds: float) -> None:
        self.report.waited += float(seconds)
        self.sleep(float(seconds))

    def _each_page(self, connector: Connector) -> Iterator[Page]:
        """The connector's pages, resuming from the last stored position after a retryable
        error (a generator that raised cannot go on). A read of one record that still fails
        when the retries are spent is passed over, once: the tool answers for everything
        else, and stopping there would hold back every newer page on every run."""
        passed: set[str] = set()
        pages: Iterator[Page] | None = None

        def next_page() -> Page | None:
            nonlocal pages
            if pages is None:
                pages = connector.pages(self.envelope.get("c"))
            try:
                return next(pages, None)
            except ConnectorError:
                pages = None
                raise

        while True:
            try:
                page = self._retrying(next_page)
            except ConnectorError as exc:
                # Retryable and raised here: its tries are spent (a wait asked for past the
                # bound is raised as a new error that names no record).
                if not (exc.retryable and exc.record and exc.record not in passed):
                    raise
                connector.pass_over(exc)
                passed.add(exc.record)
                continue
            if page is None:
                return
            yield page

    # ------------------------------------------------------------------ passes

    def _pages(self, connector: Connector) -> None:
        """Store each page with its position. The next page is read, in a thread of its own,
        while this one is written, so a backfill costs about the larger of the two, not their
        sum (bench/README.md, "Reads and sync"). The read starts only once the position in
        ``envelope`` is this page's, where a retry after a retryable error resumes; the thread
        touches HTTP only, and an error in the write waits for the read under way, so a run
        ends with nothing of it still running."""
        pages = self._each_page(connector)
        with ThreadPoolExecutor(1, thread_name_prefix=f"sync-{self.cfg.name}") as ahead:
            coming = ahead.submit(next, pages, None)
            while (page := coming.result()) is not None:
                number = self.report.pages + 1
                self.envelope["c"] = page.position
                coming = ahead.submit(next, pages, None)
                if not page.records and json.dumps(self.envelope) == self.stored:
                    continue  # a poll with nothing new: nothing to write
                with self.ledger.transaction(self.actor) as tx:
                    self._move(tx)  # first: it takes the source's row lock
                    written = copies.store_records(
                        tx, self.cfg.name, page.records, self.ledger.redact, versions=self.versions
                    )
                    crashpoint(f"sync_page_{number}_before_commit")
                crashpoint(f"sync_page_{number}_committed")
                self.report.pages = number
                self.report.new += written.new
                self.report.changed += written.changed
                self.report.linked += written.linked
                self.report.total = page.total
                if self.report.new >= self.analyze_at:
                    self.analyze_at = 2 * self.report.new
                    executions.analyze(self.ledger.store)
                if self.progress:
                    self.progress(self.report)

    def _refresh(self, connector: Connector, started: datetime) -> None:
        """Ask again for every copy that was not final, until the tool says it is (those
        this run already stored are fresh enough)."""
        ids = executions.unfinished(self.ledger.store, self.cfg.name, started, REFRESH_LIMIT)
        self._store_fetched(connector, ids)
        self.report.refreshed += len(ids)

    def _store_fetched(self, connector: Connector, ids: list[str]) -> None:
        """Ask for each id, then store what the tool has and mark gone what it has not."""
        for start in range(0, len(ids), REFRESH_BATCH):
            batch = ids[start : start + REFRESH_BATCH]
            found: list[ExecutionRecord] = []
            missing: list[str] = []
            for ext_id in batch:
                record = self._retrying(lambda ext_id=ext_id: connector.fetch(ext_id))  # type: ignore[misc]
                if record is None:
                    missing.append(ext_id)
                else:
                    found.append(record)
            with self.ledger.transaction(self.actor) as tx:
                written = copies.store_records(
                    tx, self.cfg.name, found, self.ledger.redact, versions=self.versions
                )
                self.report.gone += executions.mark_gone_by_id(tx, self.cfg.name, missing)
            self.report.new += written.new
            self.report.changed += written.changed
            self.report.linked += written.linked

    def _check_versions(self, connector: Versions) -> None:
        """The version check (:mod:`flowledger.sync.versions`), its requests bounded by
        ``version_reads``."""
        checked = versions.check_versions(
            self.ledger, self.cfg.name, connector, self.cfg.version_reads, self._retrying,
            self.actor,
        )  # fmt: skip
        self.report.versions_read += checked.read
        self.report.stale_versions += checked.stale
        self.report.notes.extend(checked.notes)

    def _reconcile_due(self, now: datetime) -> bool:
        last = self.envelope.get("reconciled_at")
        if not last:
            return True
        try:
            when = datetime.fromisoformat(last)
        except ValueError:
            return True
        return now - when >= self.cfg.reconcile_interval

    def _reconcile(self, connector: Connector, started: datetime) -> None:
        """Walk every id the tool holds; a final copy it does not list is asked for by id, and
        gets ``gone_at`` only when that read answers 404: a list that changed while it was
        paged can leave out what the tool still holds. At most :data:`GONE_CHECK_LIMIT` a run,
        the longest unseen first; the rest keep their state and are asked for on the next run.
        Copies first seen during this run are left alone, and so are non-final ones (the list
        leaves running executions out; they are refreshed by id instead)."""
        present: set[str] = set()

        def walk() -> None:
            present.clear()
            for ids in connector.present_ids():
                present.update(ids)

        self._retrying(walk)
        unlisted = self._unlisted(present, started)
        if unlisted is None:
            # An empty list from a tool that held executions is far likelier a wrong
            # project, key or proxy than a tool that pruned everything.
            self.report.notes.append(
                "the tool listed no executions at all; no copy was marked gone"
            )
            return
        count, oldest = unlisted
        checked = [ext_id for _, _, ext_id in oldest]
        self.report.unchecked = count - len(checked)
        if self.report.unchecked:
            self.report.notes.append(
                f"{self.report.unchecked} copies the tool did not list are left to ask for "
                "by id on the next run"
            )
        self._store_fetched(connector, checked)
        self._recover(connector, present)
        self.report.reconciled = True

    def _unlisted(
        self, present: set[str], started: datetime
    ) -> tuple[int, list[tuple[datetime, int, str]]] | None:
        """How many final copies (not gone, not first seen during this run) ``present`` leaves
        out, and the :data:`GONE_CHECK_LIMIT` of them seen longest ago as (last seen, row id,
        external id); ``None`` when ``present`` is empty and there is such a copy."""
        count = 0
        oldest: list[tuple[datetime, int, str]] = []
        after = 0
        while True:
            rows = executions.final_after(
                self.ledger.store, self.cfg.name, started, after, GONE_BATCH
            )
            if not rows:
                return count, oldest
            if not present:
                return None
            unseen = [
                (r.last_seen_at, r.id, r.external_id) for r in rows if r.external_id not in present
            ]
            count += len(unseen)
            oldest = heapq.nsmallest(GONE_CHECK_LIMIT, oldest + unseen)
            after = rows[-1].id

    def _recover(self, connector: Connector, present: set[str]) -> None:
        """Fetch what the tool holds and the ledger never got: an execution the list left
        out while it ran, in a gap past the probe budget, is listed once it ends, below the
        position that incremental reads start from. A copy marked gone that the tool lists
        again (a 404 that passed, a restore) is fetched too, which clears its ``gone_at``:
        left gone, an unfinished one would count as vanished and hold its operation."""
        ids = sorted(present)
        unknown: list[str] = []
        for start in range(0, len(ids), GONE_BATCH):
            chunk = ids[start : start + GONE_BATCH]
            known = executions.kept(self.ledger.store, self.cfg.name, chunk)
            unknown.extend(i for i in chunk if i not in known)
            if len(unknown) >= RECOVER_LIMIT:
                break
        self._store_fetched(connector, unknown[:RECOVER_LIMIT])
        self.report.recovered = len(unknown[:RECOVER_LIMIT])


def _load_envelope(position: str | None) -> dict[str, Any]:
    """The sources.position column: the connector's own position under ``c``, and when the
    last reconciliation ran."""
    if not position:
        return {}
    try:
        data = json.loads(position)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
