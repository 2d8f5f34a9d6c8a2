"""A plain script (cron, a shell loop) sending one invoice, guarded by the ledger.

    FLOWLEDGER_URL=http://ledger:8787 FLOWLEDGER_TOKEN=... INVOICE_API_URL=https://... \\
        python script.py INV-42 1200 --run "$(date +%F)"

``--run`` names this run: the same run started again is a replay of its calls; another run
finds the invoice sent (skip) or held.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import invoices

from flowledger.client import Held, Ledger


def main(
    argv: Sequence[str] | None = None,
    send: Callable[[dict[str, Any]], str] | None = None,
) -> int:
    parser = argparse.ArgumentParser(description="Send one invoice, at most once.")
    parser.add_argument("invoice_id")
    parser.add_argument("amount", type=int)
    parser.add_argument("--run", required=True, help="this run's id (the execution id)")
    args = parser.parse_args(argv)
    invoice = {"invoice_id": args.invoice_id, "amount": args.amount}
    with Ledger() as ledger:  # FLOWLEDGER_URL, FLOWLEDGER_TOKEN
        try:
            receipt = invoices.send_invoice_guarded(
                ledger,
                invoice,
                execution_id=args.run,
                step="script",
                send=send,
            )
        except Held as held:
            print(f"not sent: {held}", file=sys.stderr)
            return 3
    print(receipt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
