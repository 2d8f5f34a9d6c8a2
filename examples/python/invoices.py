"""The guarded write every example shares: send one invoice through the provider's API at most
once, whoever runs it (a script, an Airflow task, a Prefect task) and however often.

Plain Python on purpose: the frameworks' wrappers only say which execution and run this is,
so this function runs and is tested without Airflow or Prefect installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import httpx

from flowledger.client import Ledger, Rejected

VERSION = "invoice-sender@1"  # raise it whenever the write below changes


def post_invoice(invoice: dict[str, Any]) -> str:
    """The write: the provider's API sends the invoice and answers its message id (the
    receipt). A 4xx but 408/429 means it refused and sent nothing; anything else may have
    sent it."""
    response = httpx.post(os.environ["INVOICE_API_URL"], json=invoice, timeout=30)
    if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
        raise Rejected(f"{response.status_code}: {response.text[:200]}")
    response.raise_for_status()
    return str(response.json()["id"])


def send_invoice_guarded(
    ledger: Ledger,
    invoice: dict[str, Any],
    *,
    execution_id: str,
    run_index: int = 0,
    step: str = "send invoice",
    workflow_id: str | None = None,
    send: Callable[[dict[str, Any]], str] | None = None,
) -> str:
    """Send ``invoice`` once and return its receipt (the one recorded, when it was sent
    before). A hold raises :class:`flowledger.client.Held`: a person decides. ``send`` is
    the write (:func:`post_invoice` unless another is given)."""
    operation_id = f"invoice:{invoice.get('invoice_id')}:send"  # refused when it is missing
    with ledger.guard(
        operation_id,
        input=invoice,
        version=VERSION,
        execution_id=execution_id,
        run_index=run_index,
        step=step,
        workflow_id=workflow_id,
    ) as g:
        if g.go:
            receipt = (send or post_invoice)(invoice)
            g.confirm(receipt)
            return receipt
    assert g.skip and g.receipt is not None
    return g.receipt
