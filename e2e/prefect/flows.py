"""Flows run by Prefect's own Python (``python flows.py <out.json>``), not the ledger's, with
the ledger's client (``flowledger.client``, from ``clients/python`` on ``PYTHONPATH``).

Every guarded write goes through ``Ledger.guard``: the execution id is the flow run's id and
the run index its ``run_count``, so a flow retried by Prefect dispatches again as the same
execution, and a hold is raised as the client's ``Held``. A write appends one line to
``TARGET``, which the driver counts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from prefect import flow, tags
from prefect.runtime import flow_run

from flowledger.client import Ledger

LEDGER = Ledger(os.environ["E2E_LEDGER_URL"], token=os.environ["E2E_LEDGER_TOKEN"])
TARGET = Path(os.environ["E2E_TARGET"])
TRIES: dict[str, int] = {}


def guarded_write(operation_id: str, payload: dict[str, object], *, confirm: bool = True) -> str:
    """Write once on ``go`` and confirm; ``skip`` writes nothing; ``hold`` raises ``Held``.
    Without ``confirm`` the write is followed by a failure inside the guard (recorded by the
    client as an unknown outcome)."""
    with LEDGER.guard(
        operation_id,
        input=payload,
        version="e2e-1",
        execution_id=str(flow_run.id),
        run_index=flow_run.run_count,
        workflow_id=flow_run.flow_name,
        source="local-prefect",
    ) as g:
        if not g.go:
            return "skip"
        with TARGET.open("a") as out:
            out.write(operation_id + "\n")
        if not confirm:
            raise RuntimeError("the answer of the write was lost")
        g.confirm(f"rcpt-{operation_id}")
    return "go"


@flow(name="send-invoice")
def send_invoice(operation_id: str, amount: int) -> str:
    return guarded_write(operation_id, {"amount": amount})


@flow(name="always-fails")
def always_fails(n: int) -> None:
    raise RuntimeError(f"failure {n}")


@flow(name="retried-write", retries=1, retry_delay_seconds=0)
def retried_write(operation_id: str) -> str:
    """Writes and confirms on its first try, then fails: the retry must not write again."""
    decision = guarded_write(operation_id, {"what": "retried"})
    TRIES[operation_id] = TRIES.get(operation_id, 0) + 1
    if TRIES[operation_id] == 1:
        raise RuntimeError("failed after the write")
    return decision


@flow(name="lost-confirm", retries=1, retry_delay_seconds=0)
def lost_confirm(operation_id: str) -> str:
    """Writes and fails before its confirm: the retry is held (``Held``), not written again."""
    return guarded_write(operation_id, {"what": "lost"}, confirm=False)


def main(out: Path) -> None:
    made: dict[str, Any] = {"invoices": [], "failed": []}
    for n in range(1, 6):
        state = send_invoice(f"invoice:INV-{n}:send", 100 + n, return_state=True)
        made["invoices"].append(str(state.state_details.flow_run_id))
    with tags("ledger.operation_id:invoice:INV-9:send"):
        state = send_invoice("invoice:INV-9:send", 9, return_state=True)
        made["tagged"] = str(state.state_details.flow_run_id)
    for n in range(2):
        state = always_fails(n, return_state=True)
        made["failed"].append(str(state.state_details.flow_run_id))
    state = retried_write("invoice:INV-R:send", return_state=True)
    made["retried"] = str(state.state_details.flow_run_id)
    state = lost_confirm("invoice:INV-L:send", return_state=True)
    made["lost"] = str(state.state_details.flow_run_id)
    try:
        state.result()
    except Exception as exc:  # what the retry raised
        made["lost_error"] = f"{type(exc).__name__}: {exc}"
    out.write_text(json.dumps(made), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
