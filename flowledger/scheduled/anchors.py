"""Publishing the chain head where the operator keeps it (``[anchors]``): a job of
``flowledger run`` appends ``{"at", "hash", "seq"}`` to a file outside the database's directory
and/or queues it to the alert URLs, each time the head has moved since the last publication.
With a signing key (``[checkpoints] key``) each line also carries the signed checkpoint of the
tree at that head (``"checkpoint"``), which anyone with the verifier key can check and prove
later checkpoints consistent with.

``flowledger verify --anchors FILE`` then checks the chain against every head ever published,
so rewriting or cutting the chain after a publication is caught without anyone having copied a
hash by hand. The file is only ever appended to (``O_APPEND``) and fsync'd after each line; a
file inside the database's directory is refused, since whoever can rewrite the database can
usually rewrite that directory too.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flowledger.config import AnchorsConfig
from flowledger.domain.anchors import Anchor, AnchorError, parse_line
from flowledger.domain.checkpoints import Signer
from flowledger.plumbing.clock import Clock, utcnow
from flowledger.plumbing.faults import crashpoint
from flowledger.services.outbox import outbox_row, targets_of
from flowledger.storage.anchors import queue_new
from flowledger.storage.engine import LedgerError, Store, sqlite_path
from flowledger.storage.reads import chain
from flowledger.storage.reads.tree_proofs import tree_head

ANCHOR_FILE_MODE = 0o600
KIND = "chain_head"
_TAIL = 4096  # bytes read back from the end of the file to find the last anchor

log = logging.getLogger(__name__)


def check_place(store: Store, path: Path) -> Path:
    """The anchor file's absolute path; a file inside the database's directory, or in a
    directory that does not exist, is a :class:`LedgerError`."""
    where = path.expanduser().absolute()
    db = sqlite_path(store.url)
    if db is not None:
        db_dir = db.parent.resolve()
        if where.resolve() == db_dir or where.resolve().is_relative_to(db_dir):
            raise LedgerError(
                f"[anchors] file {where} is inside the database's directory {db_dir}: "
                "whoever can rewrite the ledger could rewrite its anchors there too; "
                "name a file on another disk or share"
            )
    if not where.parent.is_dir():
        raise LedgerError(f"[anchors] file {where}: its directory {where.parent} does not exist")
    return where


class Publisher:
    """The ``anchors`` job: :meth:`publish` is run every ``[anchors] interval``."""

    def __init__(
        self,
        store: Store,
        cfg: AnchorsConfig,
        alert_urls: Sequence[str] = (),
        *,
        clock: Clock = utcnow,
        signer: Signer | None = None,
    ) -> None:
        self.store = store
        self.signer = signer
        self.path = check_place(store, cfg.file) if cfg.file is not None else None
        self.targets = sorted(targets_of(alert_urls)) if cfg.alerts else []
        if cfg.alerts and not self.targets:
            raise LedgerError("[anchors] alerts = true needs [alerts] urls to send the head to")
        self.clock = clock
        self._last = self._last_in_file()

    def publish(self) -> Anchor | None:
        """Publish the head unless it was the last one published; the anchor, or ``None``."""
        with chain.snapshot(self.store) as conn:
            seq, digest = chain.head(conn)
            if self._last == (seq, digest):
                return None
            tree = tree_head(conn) if self.signer is not None else None
        note = self.signer.sign(tree.text()) if self.signer and tree else None
        anchor = Anchor(seq, digest, self.clock(), note)
        # The outbox first: a crash before the file is written publishes this head again at
        # the next start (the file does not have it yet), and the outbox's delivery id drops
        # the repeat; the other order would leave the alert URLs without it for good.
        if self.targets:
            self._queue(anchor)
        crashpoint("after_anchor_queued")
        if self.path is not None:
            self._append(anchor)
        self._last = (seq, digest)
        log.info("published the chain head: seq %d hash %s", seq, digest)
        return anchor

    def _append(self, anchor: Anchor) -> None:
        """One ``write`` of the whole line, then fsync. A file that does not end in a newline
        (a line cut short by a power loss) gets one first, so the new anchor stays a line of
        its own and ``verify --anchors`` names only the damaged line."""
        assert self.path is not None
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, ANCHOR_FILE_MODE)
        try:
            size = os.fstat(fd).st_size
            torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
            os.write(fd, (("\n" if torn else "") + anchor.line()).encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def _queue(self, anchor: Anchor) -> None:
        """One outbox row per alert URL, delivered like an alert (at least once, the same
        ``delivery_id`` each time, which names the sequence number)."""
        now = self.clock()
        rows: list[dict[str, Any]] = []
        for target in self.targets:
            delivery = f"head:{anchor.seq}:{anchor.hash[:16]}:{target}"
            body = {
                "delivery_id": delivery,
                "kind": KIND,
                "head": json.loads(anchor.line()),
            }
            rows.append(outbox_row(delivery, KIND, target, body, now))
        with self.store.engine.begin() as conn:
            queue_new(conn, rows)

    def _last_in_file(self) -> tuple[int, str] | None:
        """The head the file last recorded, so that a restart does not publish it again."""
        if self.path is None or not self.path.is_file():
            return None
        with self.path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - _TAIL))
            lines = handle.read().decode("utf-8", "replace").splitlines()
        for text in reversed(lines):
            if text.strip():
                try:
                    last = parse_line(text)
                except AnchorError:
                    return None  # publish anew; verify --anchors will name the bad line
                return last.seq, last.hash
        return None
