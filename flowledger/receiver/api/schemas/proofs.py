"""What the proof routes show: a signed checkpoint, and a proof file."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class CheckpointPublic(BaseModel):
    origin: str = Field(description="The ledger's identity")
    size: int = Field(description="Events in the tree")
    root: str = Field(description="The tree's root hash, base64")
    checkpoint: str = Field(description="The C2SP checkpoint, as a signed note")


class ProvenEventPublic(BaseModel):
    seq: int
    at: str
    actor: str
    kind: str
    operation_id: str | None
    hold_id: int | None
    data: dict[str, Any]
    prev_hash: str
    hash: str
    inclusion: list[str] = Field(description="The RFC 9162 audit path, base64 hashes")


class ProofPublic(BaseModel):
    format: str
    checkpoint: str
    operation_id: str
    events: list[ProvenEventPublic]
