"""Data builders and the fake clock, so that each test says only what matters to it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from flowledger import domain
from flowledger.services.ledger import DispatchInput

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
SHIFT_END = datetime(2026, 11, 2, 17, 0, tzinfo=UTC)  # the demo shift ends here


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> datetime:
        self.now += timedelta(**kw)
        return self.now


def req(
    execution_id: str = "exec-1",
    *,
    input: Any = None,
    version: str = "v1",
    run_index: int | None = 0,
    workflow_id: str | None = "wf-1",
    **kw: Any,
) -> DispatchInput:
    return DispatchInput(
        processing_version=version,
        execution_id=execution_id,
        input={"invoice": "INV-42", "amount": 1200} if input is None else input,
        has_input=True,
        run_index=run_index,
        workflow_id=workflow_id,
        step="send invoice",
        **kw,
    )


def op(state: domain.State = domain.State.PREPARED, **kw: Any) -> domain.Operation:
    values: dict[str, Any] = {
        "operation_id": "invoice:INV-42:send",
        "state": state,
        "input_hash": "sha256:" + "a" * 64,
        "processing_version": "v1",
    }
    if state is not domain.State.PREPARED:
        values.update(
            attempt=1, execution_id="exec-1", run_index=0, deadline=T0 + timedelta(minutes=15)
        )
    if state is domain.State.CONFIRMED:
        values["receipt"] = "R-1"
    values.update(kw)
    return domain.Operation(**values)


def dreq(execution_id: str = "exec-1", **kw: Any) -> domain.DispatchRequest:
    values: dict[str, Any] = {
        "input_hash": "sha256:" + "a" * 64,
        "processing_version": "v1",
        "execution_id": execution_id,
        "run_index": 0,
    }
    values.update(kw)
    return domain.DispatchRequest(**values)


def execution_row(
    external_id: str,
    status: str = "running",
    *,
    source: str = "prod-n8n",
    started_at: datetime = T0,
    final: bool | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """An ``executions`` row as the sync would store it."""
    return {
        "source": source,
        "external_id": external_id,
        "status": status,
        "final": status not in ("running", "new", "waiting") if final is None else final,
        "started_at": started_at,
        "first_seen_at": started_at,
        "last_seen_at": started_at,
        **kw,
    }


def dispatch_body(execution_id: str = "exec-1", **kw: Any) -> dict[str, Any]:
    """The JSON body of a ``dispatch`` call as a workflow sends it."""
    body: dict[str, Any] = {
        "processing_version": "v1",
        "execution_id": execution_id,
        "workflow_id": "wf-1",
        "step": "send invoice",
        "run_index": 0,
        "input": {"invoice": "INV-42", "amount": 1200},
    }
    body.update(kw)
    return body
