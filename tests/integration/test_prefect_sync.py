"""Prefect flow runs synced into the ledger: linked to operations by the dispatch's
``execution_id`` (the flow run's id), by a ``ledger.operation_id:<id>`` tag or an
``operation_id`` parameter; a retried run stays one execution; a deleted run is gone."""

from __future__ import annotations

from typing import Any

from flowledger.config import SourceConfig
from flowledger.services.ledger import Ledger
from flowledger.storage.reads import records as queries
from flowledger.storage.reads.execution_copies import list_executions
from flowledger.sync import sync_source
from tests.support.builders import req
from tests.support.fakes.prefect import FakePrefect

OP = "invoice:INV-9:send"


def sync(ledger: Ledger, fake: FakePrefect, **kw: Any) -> Any:
    cfg = SourceConfig(name="prefect", kind="prefect", base_url=fake.base_url, page_size=50)
    return sync_source(ledger, cfg, fake.client(), sleep=lambda _: None, **kw)


def linked(ledger: Ledger, operation_id: str) -> list[tuple[str, str]]:
    detail = queries.operation_detail(ledger.store, operation_id)
    assert detail is not None
    return [(e["external_id"], e["linked_via"]) for e in detail.executions]


def test_runs_link_by_execution_id_tag_and_parameter(ledger: Ledger) -> None:
    prefect = FakePrefect()
    dispatched, tagged, with_parameter, plain = prefect.add(4)
    for op in (OP, "tagged:op", "param:op"):
        ledger.dispatch(op, req(f"elsewhere-{op}" if op != OP else dispatched)).run("token:t")
    prefect.runs[tagged]["tags"] = ["billing", "ledger.operation_id:tagged:op"]
    prefect.runs[with_parameter]["parameters"] = {"operation_id": "param:op"}
    prefect.runs[plain]["parameters"] = {}
    assert sync(ledger, prefect).ok
    assert linked(ledger, OP) == [(dispatched, "attempt")]
    assert linked(ledger, "tagged:op") == [(tagged, "custom_data")]
    assert linked(ledger, "param:op") == [(with_parameter, "custom_data")]


def test_a_retried_run_is_one_execution_and_a_deleted_one_is_gone(
    ledger: Ledger, clock: Any
) -> None:
    prefect = FakePrefect()
    retried, deleted = prefect.add(2, status="running")
    assert sync(ledger, prefect).ok
    prefect.runs[retried]["run_count"] = 2
    prefect.set_status(retried, "success")
    prefect.delete(deleted)
    clock.advance(hours=2)
    assert sync(ledger, prefect, reconcile=True).ok
    rows = {r["external_id"]: r for r in list_executions(ledger.store, limit=10)}
    assert set(rows) == {retried, deleted}
    assert rows[retried]["status"] == "success" and rows[retried]["gone_at"] is None
    assert rows[deleted]["gone_at"] is not None
