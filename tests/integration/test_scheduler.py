"""Jobs survive their exceptions, never overlap themselves, and run only on the leaseholder."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from apscheduler.events import EVENT_JOB_MAX_INSTANCES
from prometheus_client import CollectorRegistry

from flowledger.domain.times import for_people
from flowledger.reports.observability import JobMetrics
from flowledger.scheduled.lease import Lease
from flowledger.scheduled.scheduler import JOB_THREADS, Job, Scheduler
from flowledger.storage.engine import Store
from tests.support.builders import FakeClock

WAIT = 30  # seconds: a generous bound on waiting for an event, never a pause
FAST = timedelta(milliseconds=20)


def test_a_job_that_raises_runs_again_and_is_counted() -> None:
    calls: list[int] = []
    second = threading.Event()

    def flaky() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        second.set()

    registry = CollectorRegistry()
    metrics = JobMetrics(registry)
    sched = Scheduler([Job("flaky", FAST, flaky)], metrics=metrics)
    sched.start()
    try:
        assert second.wait(WAIT)
    finally:
        sched.shutdown()
    assert registry.get_sample_value("flowledger_job_failures_total", {"job": "flaky"}) == 1
    assert registry.get_sample_value("flowledger_job_runs_total", {"job": "flaky"}) >= 2


def test_a_slow_job_is_not_started_twice() -> None:
    running = threading.Event()
    release = threading.Event()
    skipped = threading.Event()
    inside = 0
    most = 0
    lock = threading.Lock()

    def slow() -> None:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        running.set()
        release.wait(WAIT)
        with lock:
            inside -= 1

    registry = CollectorRegistry()
    sched = Scheduler([Job("slow", FAST, slow)], metrics=JobMetrics(registry))
    sched.aps.add_listener(lambda _: skipped.set(), EVENT_JOB_MAX_INSTANCES)
    sched.start()
    try:
        assert running.wait(WAIT)
        assert skipped.wait(WAIT)  # the scheduler tried to start it again, and did not
        assert most == 1
    finally:
        release.set()
        sched.shutdown()
    assert most == 1
    assert registry.get_sample_value("flowledger_job_skipped_total", {"job": "slow"}) >= 1


def test_only_the_lease_holder_runs_jobs_and_an_expired_lease_is_taken_over(
    store: Store, clock: FakeClock
) -> None:
    a = Lease(store, timedelta(seconds=30), holder="a", clock=clock)
    b = Lease(store, timedelta(seconds=30), holder="b", clock=clock)
    ran: list[str] = []
    sa_ = Scheduler([Job("j", FAST, lambda: ran.append("a"))], lease=a)
    sb = Scheduler([Job("j", FAST, lambda: ran.append("b"))], lease=b)
    assert a.renew() and not b.renew()
    assert sa_.run_job(sa_.jobs["j"]) and not sb.run_job(sb.jobs["j"])
    clock.advance(seconds=29)
    assert a.renew() and not b.renew()  # renewed: another 30 s from now
    clock.advance(seconds=29)
    assert not b.renew()
    clock.advance(seconds=1)  # a did not renew: expired
    assert not a.held()
    assert b.renew() and not a.renew()
    assert sb.run_job(sb.jobs["j"]) and not sa_.run_job(sa_.jobs["j"])
    assert ran == ["a", "b"]
    b.release()
    assert a.renew()


def test_the_lease_is_renewed_while_slow_jobs_fill_every_job_thread(store: Store) -> None:
    lease = Lease(store, timedelta(seconds=3), holder="a")
    release, all_busy, renewed_while_busy = (threading.Event() for _ in range(3))
    busy: list[str] = []
    renew = lease.renew

    def counting_renew() -> bool:
        if all_busy.is_set():
            renewed_while_busy.set()
        return renew()

    def slow(name: str) -> Callable[[], None]:
        def job() -> None:
            busy.append(name)
            if len(busy) == JOB_THREADS:
                all_busy.set()
            release.wait(60)

        return job

    lease.renew = counting_renew  # type: ignore[method-assign]
    jobs = [Job(f"sync:{n}", FAST, slow(f"s{n}")) for n in range(JOB_THREADS)]
    s = Scheduler(jobs, lease=lease)
    s.start()
    try:
        assert all_busy.wait(30), "the slow jobs never filled the pool"
        assert renewed_while_busy.wait(30), "the lease was not renewed while the pool was full"
    finally:
        release.set()
        s.shutdown()


def test_a_scheduler_says_it_stands_by_only_when_another_process_holds_the_lease(
    store: Store, clock: FakeClock, caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger="flowledger.scheduled.scheduler")
    held = Lease(store, timedelta(seconds=30), holder="a", clock=clock)
    assert held.renew()
    waiting = Lease(store, timedelta(seconds=30), holder="b", clock=clock)
    broken = Lease(store, timedelta(seconds=30), holder="c", clock=clock)

    def unreachable() -> bool:
        raise RuntimeError("the database is not there")

    broken.renew = unreachable  # type: ignore[method-assign]
    said = []
    for lease in (waiting, broken):
        caplog.clear()
        sched = Scheduler([Job("j", timedelta(hours=1), lambda: None)], lease=lease)
        sched.start()
        sched.shutdown()
        said.append(
            [r.getMessage() for r in caplog.records if "scheduler started" in r.getMessage()]
        )
    until = for_people(clock() + timedelta(seconds=30))
    assert said[0] == [
        f"scheduler started: j; standing by: the scheduler lease is held by a until {until}; a"
        " process that stopped holds it until then, and the jobs run here once it lapses"
    ]
    assert said[1] == ["scheduler started: j"]  # it could not ask: it says no more than it knows
