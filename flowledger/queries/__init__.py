"""Reads: paged views of the ledger for the API, the CLI, the terminal UI, the handover
report and the metrics."""
