"""Published chain heads ("anchors"): one JSON object a line, ``{"at": …, "hash": …, "seq": …}``.

A head copied somewhere the database's writer cannot reach turns a later rewrite or truncation
of the chain into a visible break: every anchored sequence number must still exist with exactly
that hash. JSON Lines because an operator can read, ``tail`` and ``grep`` it, and any tool can
parse it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

_HASH = re.compile(r"^[0-9a-f]{64}$")


class AnchorError(ValueError):
    """A line of an anchor file that is not an anchor."""


@dataclass(frozen=True)
class Anchor:
    seq: int
    hash: str
    at: datetime
    # The signed checkpoint of the tree at ``seq`` events, when a signing key is configured
    # (a line without one, as every line was before checkpoints, still checks the head).
    checkpoint: str | None = None

    def line(self) -> str:
        """The anchor as one line of the file (with its newline)."""
        at = self.at.astimezone(UTC).isoformat(timespec="seconds")
        fields: dict[str, object] = {"at": at, "hash": self.hash, "seq": self.seq}
        if self.checkpoint is not None:
            fields["checkpoint"] = self.checkpoint
        return json.dumps(fields, sort_keys=True, ensure_ascii=False) + "\n"


def parse_line(text: str) -> Anchor:
    """One line of an anchor file; :class:`AnchorError` says what is wrong with it."""
    try:
        raw = json.loads(text)
    except ValueError:
        raise AnchorError('not a JSON object like {"at": …, "hash": …, "seq": …}') from None
    if not isinstance(raw, dict):
        raise AnchorError('not a JSON object like {"at": …, "hash": …, "seq": …}')
    seq, digest, at = raw.get("seq"), raw.get("hash"), raw.get("at")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise AnchorError("seq must be a whole number, 0 or more")
    if not isinstance(digest, str) or not _HASH.match(digest):
        raise AnchorError("hash must be 64 lower-case hex digits")
    if not isinstance(at, str):
        raise AnchorError("at must be an ISO 8601 time")
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        raise AnchorError(f"at {at!r} is not an ISO 8601 time") from None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    checkpoint = raw.get("checkpoint")
    if checkpoint is not None and not isinstance(checkpoint, str):
        raise AnchorError("checkpoint must be a signed note, as text")
    return Anchor(seq, digest, when, checkpoint)
