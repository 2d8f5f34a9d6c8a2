"""A witness's refusal of a checkpoint is an alarm (the log was rewritten, forked, truncated or
restored) until a person has found out why and clears it here, with a note saying what they
found: recorded as a ``witness_refusal_cleared`` event under their name."""

from __future__ import annotations

from flowledger.domain import IllegalTransition
from flowledger.domain.limits import MAX_NOTE_LENGTH
from flowledger.services.ledger import Ledger, Tx
from flowledger.services.values import check_note, operator_actor
from flowledger.services.witnessing import name_of
from flowledger.storage import witnesses as kept
from flowledger.storage.problems import Missing
from flowledger.storage.reads.witnesses import Witnessed, states

CLEARED = "witness_refusal_cleared"


def clear_refusal(ledger: Ledger, witness: str, *, operator: str, note: str) -> list[Witnessed]:
    """End the alarm of ``witness``'s refusal (its name or vkey), with one event per witness
    cleared; the refusals cleared."""
    note = ledger.redact(check_note(note).strip())[:MAX_NOTE_LENGTH]
    if not note:
        raise IllegalTransition("a note is required", code="note_required")

    def work(tx: Tx) -> list[Witnessed]:
        matching = [
            w
            for w in states(tx.conn).values()
            if w.refused_at is not None and witness in (w.witness, name_of(w.witness))
        ]
        if not matching:
            raise Missing(f"no refusal of a witness {witness!r} to clear")
        for w in matching:
            kept.clear_refusal(tx.conn, w.witness, tx.now)
            data = {
                "witness": w.witness,
                "refused_size": w.refused_size,
                "refusal": w.refusal,
                "note": note,
            }
            tx.event(CLEARED, None, data)
        return matching

    return ledger.run(operator_actor(operator), work)
