"""What ``status``, ``doctor``, the terminal UI and the alerts say of a witness's refusal: the
one line a person reads, naming the witness, the checkpoint it refused, why, and what to do."""

from __future__ import annotations

from flowledger.domain.times import for_people
from flowledger.storage.reads.witnesses import Witnessed


def name_of(witness: str) -> str:
    """A witness's name, from its vkey."""
    return witness.split("+", 1)[0]


def alarm(w: Witnessed) -> str:
    assert w.refused_at is not None
    name = name_of(w.witness)
    return (
        f"WITNESS ALARM: {name} refused the checkpoint of {w.refused_size} events at "
        f"{for_people(w.refused_at)}: {w.refusal}. Someone else has seen another history of "
        "this log; find out why (a restore, a second copy, a rewrite) before trusting it, "
        f"then run `flowledger witness clear {name} --note TEXT` (docs/proofs.md#witnesses)"
    )
