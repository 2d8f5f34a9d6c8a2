"""docs/log-format.md's worked example and rules, checked: a verifier written from that page
computes what the ledger computes."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime
from pathlib import Path

from flowledger.domain import merkle
from flowledger.domain.chain import event_body
from flowledger.domain.checkpoints import key_id
from flowledger.domain.hashing import canonical_json, chain_hash, genesis_hash

DOC = (Path(__file__).resolve().parents[2] / "docs" / "log-format.md").read_text()


def example() -> tuple[str, str, bytes, str, str]:
    section = DOC.split("## A worked example", 1)[1]
    ledger_id = re.search(r"Ledger id `([^`]+)`", section)
    genesis = re.search(r"genesis\s+`([0-9a-f]{64})`", section)
    event = re.search(r"```\n(.+?)\n```", section, re.S)
    digest = re.search(r"hash\(1\) = `([0-9a-f]{64})`", section)
    root = re.search(r"size 1, is `([^`]+)`", section)
    assert ledger_id and genesis and event and digest and root
    return (
        ledger_id[1],
        genesis[1],
        event[1].encode(),
        digest[1],
        root[1],
    )


def test_the_worked_example_is_what_the_ledger_computes() -> None:
    ledger_id, genesis, sealed, digest, root = example()
    assert genesis_hash(ledger_id) == genesis
    # The page's rule, by hand: the previous hash as hex text, then the event's bytes.
    assert hashlib.sha256(genesis.encode() + sealed).hexdigest() == digest
    data = {
        "attempt": 1,
        "created": True,
        "deadline": "2026-11-02T09:15:00+00:00",
        "decision": "go",
        "execution_id": "exec-7",
        "input_hash": "sha256:806e4d771209d87ed59f983e55a53f516a7c06b5dc5d1f701194f256d5ae93b2",
        "input_ref": None,
        "max_attempts": 5,
        "processing_version": "v1",
        "run_index": 0,
    }
    at = datetime(2026, 11, 2, 9, tzinfo=UTC)
    body = event_body(1, at, "token:n8n", "dispatched", "invoice:INV-42:send", None, data)
    assert canonical_json(body) == sealed and chain_hash(genesis, body) == digest
    leaf = hashlib.sha256(b"\x00" + bytes.fromhex(digest)).digest()
    assert (
        base64.b64encode(leaf).decode()
        == root
        == base64.b64encode(merkle.event_leaf(digest)).decode()
    )


def test_the_escapes_the_page_lists_are_the_canonical_forms() -> None:
    value = {"b": '"\\\n\r\t\b\f\x01/\x7f\u2028é', "a": [1, None, True]}
    assert (
        canonical_json(value)
        == ('{"a":[1,null,true],"b":"\\"\\\\\\n\\r\\t\\b\\f\\u0001/\x7f\u2028é"}').encode()
    )


def test_the_key_id_and_empty_root_the_page_gives() -> None:
    public = bytes(range(32))
    assert key_id("n", public) == hashlib.sha256(b"n\n\x01" + public).digest()[:4]
    assert base64.b64encode(merkle.EMPTY_ROOT).decode() in DOC
