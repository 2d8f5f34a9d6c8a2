"""``python -m ledger.cli``: the same as the ``flowledger`` command."""

from ledger.cli import main

main()
