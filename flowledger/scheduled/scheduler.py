"""The periodic jobs: APScheduler 3's ``BackgroundScheduler`` with the ledger's rules.

A job never overlaps itself (``max_instances=1``; a start while the previous run goes on is
skipped and counted) and late starts collapse into one (``coalesce``). A job that raises is
logged and counted, and runs again at its next time. With a :class:`Lease`, only the process
holding it runs the jobs; the lease is renewed by a job of its own every third of its time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobExecutionEvent
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from flowledger.domain.times import for_people
from flowledger.reports.observability import JobMetrics
from flowledger.scheduled.lease import Lease

log = logging.getLogger(__name__)
LEASE_JOB = "lease"
JOB_THREADS = 10  # APScheduler's default pool size, for every job but the lease's


@dataclass(frozen=True)
class Job:
    """Run ``func`` every ``interval``; ``needs_lease`` jobs run only on the lease holder."""

    id: str
    interval: timedelta
    func: Callable[[], object]
    needs_lease: bool = True


class Scheduler:
    def __init__(
        self,
        jobs: Sequence[Job],
        *,
        lease: Lease | None = None,
        metrics: JobMetrics | None = None,
    ) -> None:
        self.jobs = {job.id: job for job in jobs}
        self.lease = lease
        self.metrics = metrics
        self.aps = BackgroundScheduler(
            timezone=UTC,
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None},
            # The lease is renewed on a thread of its own: ten slow jobs (sources waiting out
            # timeouts, say) filling the shared pool must not let it lapse under them.
            executors={
                "default": ThreadPoolExecutor(JOB_THREADS),
                LEASE_JOB: ThreadPoolExecutor(1),
            },
        )
        self.aps.add_listener(self._skipped, EVENT_JOB_MAX_INSTANCES)
        if lease is not None:
            every = max(lease.ttl / 3, timedelta(milliseconds=100))
            self._add(Job(LEASE_JOB, every, lease.renew, needs_lease=False))
        for job in jobs:
            self._add(job)

    def _add(self, job: Job) -> None:
        self.aps.add_job(
            self.run_job,
            IntervalTrigger(seconds=job.interval.total_seconds(), timezone=UTC),
            args=[job],
            id=job.id,
            name=job.id,
            next_run_time=datetime.now(UTC),
            executor=LEASE_JOB if job.id == LEASE_JOB else "default",
        )

    def start(self) -> None:
        waits = ""
        if self.lease is not None:
            asked = self.run_job(
                Job(LEASE_JOB, self.lease.ttl, self.lease.renew, needs_lease=False)
            )
            # Not when the database could not be asked, nor when the schema keeps it from us.
            if asked and not self.lease.held() and self.lease.refused is None:
                waits = f"; standing by: {_held_by(self.lease)}"
        self.aps.start()
        log.info("scheduler started: %s%s", ", ".join(sorted(self.jobs)) or "no jobs", waits)

    def shutdown(self, wait: bool = True) -> None:
        if self.aps.running:
            self.aps.shutdown(wait=wait)
        if self.lease is not None:
            self.lease.release()

    def run_job(self, job: Job) -> bool:
        """Run ``job`` once here and now, unless another process holds the lease. Returns
        whether it ran without raising; an exception is logged and counted, never raised."""
        if job.needs_lease and self.lease is not None and not self.lease.held():
            return False
        started = time.perf_counter()
        try:
            job.func()
            return True
        except Exception:
            log.exception("job %s failed; it runs again in %s", job.id, job.interval)
            if self.metrics is not None:
                self.metrics.failures.labels(job.id).inc()
            return False
        finally:
            if self.metrics is not None:
                self.metrics.runs.labels(job.id).inc()
                self.metrics.duration.labels(job.id).observe(time.perf_counter() - started)

    def _skipped(self, event: JobExecutionEvent) -> None:
        log.warning("job %s still running at its next start; that start is skipped", event.job_id)
        if self.metrics is not None:
            self.metrics.skipped.labels(event.job_id).inc()


def _held_by(lease: Lease) -> str:
    """Who holds ``lease``, and until when. After a restore the row is the one the backup
    carried, of a process that ran before it: named with its time, it reads as what it is,
    not as a second process on the ledger."""
    try:
        found = lease.holder_now()
    except Exception:  # the line is said all the same, with less in it
        log.debug("the %s lease's holder could not be read", lease.name, exc_info=True)
        found = None
    if found is None:
        return f"another process holds the {lease.name} lease, and the jobs run here once it lapses"
    holder, until = found
    return (
        f"the {lease.name} lease is held by {holder} until {for_people(until)}; a process that"
        " stopped holds it until then, and the jobs run here once it lapses"
    )
