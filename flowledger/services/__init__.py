"""The writer: every change to the ledger, with its event, in one transaction."""
