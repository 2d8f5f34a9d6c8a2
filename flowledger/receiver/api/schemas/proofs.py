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


class RangeProofPublic(BaseModel):
    format: str
    checkpoint: str
    range: list[int] = Field(description="The first and last event's numbers")
    events: list[ProvenEventPublic]


class ConsistencyPublic(BaseModel):
    old_size: int
    new_size: int
    old_root: str = Field(description="The root of the older tree, base64")
    new_root: str = Field(description="The root of the newer tree, base64")
    consistency: list[str] = Field(description="The RFC 9162 consistency proof, base64 hashes")
