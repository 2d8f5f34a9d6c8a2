"""A Prefect 3 flow whose task sends an invoice, guarded by the ledger. The worker needs
``flowledger-client`` and the environment ``FLOWLEDGER_URL``, ``FLOWLEDGER_TOKEN`` and
``INVOICE_API_URL``; run it with ``python prefect_flow.py INV-42 1200``.

The execution id is the flow run's id, the name the ledger's Prefect source gives it, so the
sync links the run to the operation. The run index is the task run's try less one: a retried
try is another run, so a try after one that died mid-write is held for a person instead of
being answered ``go`` again. An async task does the same with ``AsyncLedger``.
"""

from __future__ import annotations

import sys
from typing import Any

import invoices
from prefect import flow, task
from prefect.runtime import flow_run, task_run

from flowledger.client import Ledger


@task(retries=2)
def send_invoice(invoice: dict[str, Any]) -> str:
    with Ledger() as ledger:
        return invoices.send_invoice_guarded(
            ledger,
            invoice,
            execution_id=str(flow_run.id),
            run_index=task_run.run_count - 1,
            step=task_run.task_name,
        )


@flow
def invoice_sender(invoice_id: str, amount: int) -> str:
    return send_invoice({"invoice_id": invoice_id, "amount": amount})


if __name__ == "__main__":
    print(invoice_sender(sys.argv[1], int(sys.argv[2])))
