"""What ``--json`` prints for ``status``, ``verify`` and ``token list``: the facts their text
says, under the names ``show --json`` and ``holds --json`` use (``state``, ``reason``, ids as
stored) and times as ISO 8601 (:func:`flowledger.cli.common.echo_json` prints them)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from flowledger.domain import State

if TYPE_CHECKING:
    from flowledger.storage.reads.anchor_check import AnchorCheck
    from flowledger.storage.reads.chain import VerifyResult
    from flowledger.storage.reads.records import Status
    from flowledger.storage.reads.replay import DeepResult, Finding


def status(st: Status, now: datetime) -> dict[str, Any]:
    """Operations by state (every state, none left out for a zero), open holds by reason,
    and the chain's head, as counted at ``at``."""
    return {
        "ledger_id": st.ledger_id,
        "at": now,
        "operations": {
            "total": sum(st.by_state.values()),
            "by_state": {state.value: st.by_state.get(state.value, 0) for state in State},
        },
        "open_holds": {
            "total": sum(st.open_holds.values()),
            "blocking": st.blocking_open,
            "overdue": st.overdue,
            "by_reason": dict(sorted(st.open_holds.items())),
        },
        # Twin triggers counted so far (open and resolved duplicate_trigger holds), by source.
        "twin_triggers": dict(sorted(st.twin_triggers.items())),
        "events": st.events,
        "head_hash": st.head_hash,
        # When the backup this ledger was restored from was taken, until acknowledged.
        "restored_from": st.restored_from,
        # Each witness's refusal of a checkpoint that nobody has cleared: a blocking alarm.
        "witness_alarms": [
            {
                "witness": w.witness.split("+", 1)[0],
                "vkey": w.witness,
                "refused_at": w.refused_at,
                "size": w.refused_size,
                "reason": w.refusal,
            }
            for w in st.witness_refusals
        ],
    }


def verify(
    result: VerifyResult, anchors: AnchorCheck | None, deep: DeepResult | None
) -> dict[str, Any]:
    """The result of each check asked for (``null`` for one not asked), and ``ok`` for all."""
    checks = [result.ok, anchors is None or anchors.ok, deep is None or deep.ok]
    return {
        "ok": all(checks),
        "ledger_id": result.ledger_id,
        "chain": {
            "ok": result.ok,
            "checked": result.checked,
            "head_seq": result.head_seq,
            "head_hash": result.head_hash,
            "bad_seq": result.bad_seq,
            "tree_ok": result.tree_ok,
            "problem": result.problem,
            "expected_head": _expected(result),
        },
        "anchors": None
        if anchors is None
        else {"ok": anchors.ok, "checked": anchors.checked, "problems": anchors.problems},
        "deep": None
        if deep is None
        else {
            "ok": deep.ok,
            "events": deep.events,
            "operations": deep.operations,
            "holds": deep.holds,
            "differences": len(deep.findings) + deep.more,
            "findings": [_finding(f) for f in deep.findings],
        },
    }


def _expected(result: VerifyResult) -> dict[str, Any] | None:
    """Where ``--expect-head`` was found: the event whose hash it is (0: the empty ledger's
    head) and how many events came after it; null when not asked or not found."""
    if not result.ok or result.expected_seq is None:
        return None
    return {"seq": result.expected_seq, "appended_since": result.head_seq - result.expected_seq}


def _finding(f: Finding) -> dict[str, Any]:
    return {
        "what": f.what,
        "column": f.column,
        "stored": _plain(f.stored),
        "expected": _plain(f.expected),
        "note": f.note or None,
    }


def _plain(value: Any) -> Any:
    """A compared value as JSON holds it: a time as itself (ISO 8601 when written), what JSON
    has no type for as Python writes it."""
    if value is None or isinstance(value, str | int | float | bool | datetime):
        return value
    return repr(value)


def tokens(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each token as listed (never the token or its hash), with its ``state``."""
    return [{**r, "state": "revoked" if r["revoked_at"] else "active"} for r in rows]
