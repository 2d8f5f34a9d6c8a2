"""What the tests share besides fixtures: data builders and a fake clock (``builders``), fake
workflow tools (``fakes``), receiver servers, tokens and signatures (``receiver``), database
snapshots (``database``), child processes (``processes``), an alert receiver (``webhook``) and
the terminal UI's pilot steps (``tui``). Fixtures stay in the ``conftest.py`` files."""
