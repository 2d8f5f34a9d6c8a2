"""The ledger's processes besides the CLI and the terminal UI: the long-running process
(:mod:`.runner`, ``flowledger run``), the demo ledger (:mod:`.demo`) and the proof checker an
auditor runs without the database (:mod:`.verify_proof`)."""
