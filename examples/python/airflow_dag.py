"""An Airflow 3 DAG whose task sends an invoice, guarded by the ledger. Put this file and
``invoices.py`` in the DAGs folder; the workers need ``flowledger-client`` and the
environment ``FLOWLEDGER_URL``, ``FLOWLEDGER_TOKEN`` and ``INVOICE_API_URL``.

The execution id is ``<dag_id>/<dag_run_id>``, the name the ledger's Airflow source gives a
DAG run, so the sync links the run to the operation. The run index is the task's try number
less one: a retried try is another run, so a try after one that died mid-write is held for a
person instead of being answered ``go`` again.
"""

from __future__ import annotations

import invoices
from airflow.sdk import dag, get_current_context, task

from flowledger.client import Ledger


@task(retries=2)
def send_invoice() -> str:
    context = get_current_context()
    ti = context["ti"]
    params = context["params"]
    invoice = {"invoice_id": params["invoice_id"], "amount": params["amount"]}
    with Ledger() as ledger:
        return invoices.send_invoice_guarded(
            ledger,
            invoice,
            execution_id=f"{ti.dag_id}/{context['run_id']}",
            run_index=ti.try_number - 1,
            step=ti.task_id,
            workflow_id=ti.dag_id,
        )


@dag(schedule=None, params={"invoice_id": "INV-42", "amount": 1200})
def invoice_sender() -> None:
    send_invoice()


invoice_sender()
