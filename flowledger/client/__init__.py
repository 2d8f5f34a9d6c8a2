"""flowledger's Python client: guard a write to another system from any Python workflow.

```python
from flowledger.client import Ledger

ledger = Ledger("http://ledger:8787", token=...)   # or FLOWLEDGER_URL / FLOWLEDGER_TOKEN
with ledger.guard("invoice:INV-42:send", input=payload, version="v3", execution_id=run_id) as g:
    if g.go:
        g.confirm(send_invoice(payload))
```

It imports nothing but httpx and the standard library (never the ledger's server), so that a
workflow's environment installs it alone: ``pip install flowledger-client`` (docs/python.md).
"""

from flowledger.client.aio import AsyncGuard, AsyncLedger
from flowledger.client.errors import (
    Held,
    InvalidCall,
    LedgerError,
    ReceiptConflict,
    Rejected,
    Unfinished,
)
from flowledger.client.rules import canonical_json, idempotency_key, input_hash, signature
from flowledger.client.sync import Guard, Ledger

__version__ = "0.1.0"

__all__ = [
    "AsyncGuard",
    "AsyncLedger",
    "Guard",
    "Held",
    "InvalidCall",
    "Ledger",
    "LedgerError",
    "ReceiptConflict",
    "Rejected",
    "Unfinished",
    "canonical_json",
    "idempotency_key",
    "input_hash",
    "signature",
]
