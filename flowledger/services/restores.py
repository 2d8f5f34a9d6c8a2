"""A ledger put back from a backup knows nothing of what happened after the backup was taken:
an operation confirmed since then is ``dispatching`` or unknown to it, and its next dispatch
would be answered ``go``. It says so (``status``, ``doctor``, the terminal UI) until a person
has checked what the workflow tool did since then and acknowledges the restore here, with a
note saying what they checked."""

from __future__ import annotations

from datetime import datetime

from flowledger.domain import IllegalTransition
from flowledger.domain.limits import MAX_NOTE_LENGTH
from flowledger.domain.times import for_machines, for_people, for_typing
from flowledger.services.ledger import Ledger, Tx
from flowledger.services.values import check_note, operator_actor
from flowledger.storage import meta
from flowledger.storage.problems import Missing


def acknowledge_restore(ledger: Ledger, *, operator: str, note: str) -> datetime:
    """Take the mark of a restore off the ledger, recorded as a ``restore_acknowledged``
    event with the note under the operator's name; returns when the backup was taken."""
    note = ledger.redact(check_note(note).strip())[:MAX_NOTE_LENGTH]
    if not note:
        raise IllegalTransition("a note is required", code="note_required")

    def work(tx: Tx) -> datetime:
        taken = meta.clear_restored(tx.conn, tx.actor, tx.now)
        if taken is None:
            raise Missing("this ledger was not restored from a backup, or that was acknowledged")
        data = {"backup_taken_at": for_machines(taken), "note": note}
        tx.event("restore_acknowledged", None, data)
        return taken

    return ledger.run(operator_actor(operator), work)


def warning(taken: datetime) -> str:
    """What ``status``, ``doctor`` and the terminal UI say of a restored ledger."""
    return (
        f"RESTORED from a backup taken at {for_people(taken)}: what happened after it is "
        "unknown to this ledger (an operation confirmed since would be answered go again). "
        "Sync, check "
        f"`flowledger executions --since {for_typing(taken)}` against the targets, then run "
        "`flowledger restored --ack --note TEXT` (docs/operations.md#backups-and-restores)"
    )
