"""Named crash points for the crash suite.

``crashpoint("after_dispatch_commit")`` does nothing unless ``FLOWLEDGER_CRASH_AT`` names that
point. Then it writes the point's name to the file ``FLOWLEDGER_CRASH_SIGNAL`` names and either
exits at once without cleanup (``FLOWLEDGER_CRASH_MODE=exit``: ``os._exit``) or blocks until
the test that watches the signal file kills it with SIGKILL (the default, ``wait``), or
blocks until the test releases it and then goes on (``block``: the point reads the named pipe
``FLOWLEDGER_CRASH_RELEASE`` until the test has opened it and closed it again; a writer, or a
disk, that stalls and then recovers).
``FLOWLEDGER_CRASH_SKIP=n`` lets the point pass ``n`` times first (to crash mid-stream, e.g.
on the third group commit rather than the first).
"""

from __future__ import annotations

import os
import threading

_AT = os.environ.get("FLOWLEDGER_CRASH_AT")
_skip = int(os.environ.get("FLOWLEDGER_CRASH_SKIP", "0") or 0)
_lock = threading.Lock()


def crashpoint(name: str) -> None:
    global _skip
    if _AT is None or name != _AT:
        return
    with _lock:
        if _skip > 0:
            _skip -= 1
            return
    signal_file = os.environ.get("FLOWLEDGER_CRASH_SIGNAL")
    if signal_file:
        # Written aside and renamed: the watcher never sees a half-written file.
        partial = f"{signal_file}.partial"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, name.encode())
        os.fsync(fd)
        os.close(fd)
        os.replace(partial, signal_file)
    mode = os.environ.get("FLOWLEDGER_CRASH_MODE", "wait")
    if mode == "exit":
        os._exit(70)
    if mode == "block":
        with open(os.environ["FLOWLEDGER_CRASH_RELEASE"], "rb") as release:
            release.read()
        return
    threading.Event().wait()  # until SIGKILL
