"""A deadline on a block of work against PostgreSQL that no driver option gives.

libpq bounds how long a connection may take to open (``connect_timeout``) and how long sent
data may stay unacknowledged (``tcp_user_timeout``), but a server whose host still
acknowledges every packet and never answers (a stopped process, a stalled disk, a lock that is
never released on its side) leaves a query waiting for as long as it lasts: a statement
timeout is the server's to enforce, and it is the server that does not run. psycopg has no
client-side timeout on a query either.

:class:`Deadline` bounds a block instead: when the block runs past its time, a watchdog thread
shuts down the sockets of every connection the engine has open (each one's
``Connection.fileno()``, through the operating system's ``shutdown``, never closing the
driver's descriptor under it). The call blocked on one fails at once as a lost connection, the
pool discards that connection, and the next block connects again: the process recovers when the
server answers again, with no restart. Meant for a process whose engine serves only the bounded
work (the receiver's writer process): every connection of that engine is cut, the idle ones in
its pool too, which a server that stopped answering has made as good as lost.

A transaction cut this way may still commit: its ``COMMIT`` may have reached the server before
the cut. Whoever was waiting for it is told that its outcome is unknown (503), never that it
failed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

log = logging.getLogger("flowledger.storage")


class Deadline:
    """``with deadline.bound(): …`` runs at most ``seconds`` before the engine's connections
    are cut (once per block). One block at a time: the writer process's batches. Made before
    the engine's first connection: it knows the connections it saw opened."""

    def __init__(self, engine: Engine, seconds: float) -> None:
        self.seconds = seconds
        self.cuts = 0  # blocks cut so far
        self._connections: weakref.WeakSet[Any] = weakref.WeakSet()
        self._changed = threading.Condition()
        self._until: float | None = None  # the running block's deadline (monotonic)
        sa.event.listen(engine, "connect", self._connected)
        threading.Thread(target=self._watch, name="flowledger-deadline", daemon=True).start()

    def _connected(self, dbapi_connection: Any, _record: Any) -> None:
        self._connections.add(dbapi_connection)

    @contextlib.contextmanager
    def bound(self) -> Iterator[None]:
        with self._changed:
            self._until = time.monotonic() + self.seconds
            self._changed.notify()
        try:
            yield
        finally:
            with self._changed:  # a cut under way ends before the block does
                self._until = None
                self._changed.notify()

    def _watch(self) -> None:
        with self._changed:
            while True:
                if self._until is None:
                    self._changed.wait()
                    continue
                left = self._until - time.monotonic()
                if left > 0:
                    self._changed.wait(left)
                    continue
                self._until = None
                self.cuts += 1
                cut = sum(_shut(c) for c in list(self._connections))
                log.error(
                    "the database did not answer within %g s; %d connection(s) dropped",
                    self.seconds,
                    cut,
                )


def _shut(connection: Any) -> bool:
    """Shut ``connection``'s socket down in both directions (its descriptor stays the
    driver's, to close): whoever waits on it wakes to a lost connection."""
    try:
        fd = os.dup(connection.fileno())
    except Exception:  # closed or broken already
        return False
    with socket.socket(fileno=fd) as sock:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            return False
    return True
