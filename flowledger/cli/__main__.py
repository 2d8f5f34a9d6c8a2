"""``python -m flowledger.cli``: the same as the ``flowledger`` command."""

from flowledger.cli import main

main()
