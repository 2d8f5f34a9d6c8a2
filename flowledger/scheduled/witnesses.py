"""Sending each new checkpoint to the witnesses (``[[witnesses]]``), from the ``witnesses`` job
of ``flowledger run`` and from ``flowledger checkpoint``: the checkpoint is signed and kept,
then each witness gets it with the consistency proof from the size it last cosigned (C2SP
``tlog-witness``), and its cosignature is verified with its vkey and kept with the checkpoint.

A witness that does not know the size the ledger thought it held answers 409 with its own: the
checkpoint is sent again once, with the proof from that size. A witness that holds *more*
events than the ledger has, or that finds the checkpoint inconsistent with the one it cosigned
(422), has seen another history of this log: the log was rewritten, forked, truncated or
restored. That refusal is a blocking alarm (``status``, ``doctor``, the terminal UI) and an
alert, queued in the transaction that records it, until a person clears it
(``flowledger witness clear``). Anything else (the witness down, a 403 or 404, a garbled
answer) is its last error, shown, but not an alarm.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import httpx

from flowledger.config import WitnessConfig
from flowledger.domain.checkpoints import (
    COSIGNATURE_V1,
    Checkpoint,
    CheckpointError,
    Signer,
    VerifierKey,
    parse_verifier_key,
)
from flowledger.domain.cosignatures import cosignatures
from flowledger.domain.display import visible
from flowledger.domain.times import for_typing
from flowledger.domain.witnessing import Submission
from flowledger.plumbing.clock import Clock, utcnow
from flowledger.services.outbox import outbox_row, targets_of
from flowledger.storage import witnesses as kept
from flowledger.storage.engine import Store
from flowledger.storage.reads import chain
from flowledger.storage.reads.tree_proofs import consistency_hashes, tree_head
from flowledger.storage.reads.witnesses import cosigned_note

KIND = "witness_refused"
MAX_ANSWER = 64 * 1024
_SIZE = re.compile(r"^(0|[1-9][0-9]{0,18})\n$")

log = logging.getLogger(__name__)

Outcome = Literal["cosigned", "refused", "failed"]


@dataclass(frozen=True)
class Answer:
    """What one witness did with the checkpoint."""

    witness: str  # its name
    outcome: Outcome
    detail: str

    def line(self) -> str:
        """The answer in one line: ``witness NAME: cosigned at 2026-12-06T12:00:00Z``,
        ``witness NAME: refused: WHY``, ``witness NAME: not reached: URL: WHY``."""
        said = f"refused: {self.detail}" if self.outcome == "refused" else self.detail
        return f"witness {self.witness}: {said}"


@dataclass(frozen=True)
class Witnessed:
    """A checkpoint sent to the witnesses: the note with the cosignatures kept for it, and
    each witness's answer."""

    size: int
    note: str
    answers: list[Answer]

    @property
    def cosigned(self) -> int:
        return sum(a.outcome == "cosigned" for a in self.answers)


class Witnesses:
    """The ``witnesses`` job; ``client`` is injectable (``httpx.MockTransport`` in tests)."""

    def __init__(
        self,
        store: Store,
        signer: Signer,
        witnesses: Sequence[WitnessConfig],
        alert_urls: Sequence[str] = (),
        *,
        client: httpx.Client | None = None,
        clock: Clock = utcnow,
    ) -> None:
        self.store = store
        self.signer = signer
        self.witnesses = [(w, parse_verifier_key(w.vkey, COSIGNATURE_V1)) for w in witnesses]
        self.targets = sorted(targets_of(alert_urls))
        self.client = client or httpx.Client(follow_redirects=False)
        self.clock = clock

    def close(self) -> None:
        self.client.close()

    def run(self) -> Witnessed | None:
        """The job: a checkpoint for the witnesses when the tree has grown past what one of
        them last cosigned, or one of them failed last time."""
        with chain.snapshot(self.store) as conn:
            size = chain.head(conn)[0]
        stale = [
            w
            for w, _ in self.witnesses
            if kept.seen_size(self.store, w.vkey) != size or kept.last_error(self.store, w.vkey)
        ]
        if not stale:
            return None
        done = self.checkpoint()
        for answer in done.answers:
            if answer.outcome == "refused":
                log.error("%s", answer.line())
            elif answer.outcome == "failed":
                log.warning("%s", answer.line())
        return done

    def checkpoint(self) -> Witnessed:
        """Sign the tree's head, keep it, send it to every witness, keep their
        cosignatures."""
        with chain.snapshot(self.store) as conn:
            cp = tree_head(conn)
        note = self.signer.sign(cp.text())
        checkpoint_id = kept.record_checkpoint(self.store, cp, note, self.clock())
        answers = [self._submit(w, key, cp, note, checkpoint_id) for w, key in self.witnesses]
        return Witnessed(cp.size, cosigned_note(self.store, cp.size) or note, answers)

    def missing(self, note: str) -> list[str]:
        """The names of the witnesses whose cosignature ``note`` lacks."""
        try:
            found = {c.witness for c in cosignatures(note, [key for _, key in self.witnesses])}
        except CheckpointError:
            found = set()
        return [key.name for _, key in self.witnesses if key not in found]

    def _submit(
        self, w: WitnessConfig, key: VerifierKey, cp: Checkpoint, note: str, checkpoint_id: int
    ) -> Answer:
        old = kept.seen_size(self.store, w.vkey)
        if old > cp.size:
            old = 0  # the witness says what it holds (409), and the ledger compares
        for _ in range(2):
            proof = consistency_hashes(self.store, old, cp.size)
            try:
                status, text = self._post(w, Submission(old, proof, note).body())
            except httpx.HTTPError as exc:
                return self._failed(w, key, f"not reached: {w.url}: {_unreachable(exc)}")
            if status == 200:
                return self._cosigned(w, key, cp, note, text, checkpoint_id)
            if status == 409 and (held := _held_size(text)) is not None:
                if held > cp.size:
                    return self._refused(
                        w,
                        key,
                        cp,
                        f"it has cosigned {held} events of this log, the ledger has {cp.size}: "
                        "events were removed (a truncation, or a restore from a backup)",
                    )
                if held != old:
                    old = held
                    continue
            if status == 422:
                return self._refused(
                    w,
                    key,
                    cp,
                    f"it finds the checkpoint of {cp.size} events inconsistent with the "
                    f"{old} it cosigned: the log was rewritten or forked ({_first_line(text)})",
                )
            return self._failed(w, key, f"answered {status}: {_first_line(text)}")
        return self._failed(w, key, "its size kept changing under the ledger's requests")

    def _post(self, w: WitnessConfig, body: bytes) -> tuple[int, str]:
        """The status and (at most :data:`MAX_ANSWER` bytes of) the answer's text."""
        request = self.client.build_request(
            "POST",
            f"{w.url}/add-checkpoint",
            content=body,
            timeout=w.timeout.total_seconds(),
        )
        response = self.client.send(request, stream=True)
        try:
            data = b""
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) > MAX_ANSWER:
                    break
        finally:
            response.close()
        return response.status_code, data[:MAX_ANSWER].decode("utf-8", "replace")

    def _cosigned(
        self,
        w: WitnessConfig,
        key: VerifierKey,
        cp: Checkpoint,
        note: str,
        text: str,
        checkpoint_id: int,
    ) -> Answer:
        try:
            found = cosignatures(note + text, [key])
        except CheckpointError as exc:
            return self._failed(w, key, f"its answer is not a cosignature: {exc}")
        if not found:
            return self._failed(w, key, "its answer holds no cosignature by its key")
        first = found[0]
        kept.cosigned(
            self.store,
            checkpoint_id,
            w.vkey,
            w.url,
            cp.size,
            (first.line, first.timestamp),
            self.clock(),
        )
        at = for_typing(datetime.fromtimestamp(first.timestamp, UTC))
        return Answer(key.name, "cosigned", f"cosigned at {at}")

    def _failed(self, w: WitnessConfig, key: VerifierKey, why: str) -> Answer:
        why = visible(why)
        kept.failed(self.store, w.vkey, w.url, why, self.clock())
        return Answer(key.name, "failed", why)

    def _refused(self, w: WitnessConfig, key: VerifierKey, cp: Checkpoint, why: str) -> Answer:
        why = visible(why)
        now = self.clock()
        rows = [self._alert(target, key, cp, why, now) for target in self.targets]
        kept.refused(self.store, w.vkey, w.url, cp.size, why, now, rows)
        return Answer(key.name, "refused", why)

    def _alert(
        self, target: str, key: VerifierKey, cp: Checkpoint, why: str, now: datetime
    ) -> dict[str, Any]:
        delivery = f"witness:{key.id.hex()}:{cp.size}:{target}"
        body = {
            "delivery_id": delivery,
            "kind": KIND,
            "witness": key.name,
            "size": cp.size,
            "reason": why,
        }
        return outbox_row(delivery, KIND, target, body, now)


def _held_size(text: str) -> int | None:
    found = _SIZE.match(text)
    return int(found.group(1)) if found else None


def _first_line(text: str) -> str:
    return visible(text.strip().split("\n", 1)[0][:200]) or "no reason given"


def _unreachable(exc: httpx.HTTPError) -> str:
    """Why a witness was not reached, e.g. ``connection refused``, ``timed out``."""
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    root: BaseException = exc
    while root.__cause__ is not None or root.__context__ is not None:
        root = root.__cause__ or root.__context__  # type: ignore[assignment]
    said = root.strerror if isinstance(root, OSError) and root.strerror else str(root)
    said = re.sub(r"^\[Errno -?\d+\] ", "", said).strip()
    return visible(said[:1].lower() + said[1:200]) if said else type(exc).__name__
