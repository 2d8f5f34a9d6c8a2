"""The sweep's pure decisions: cause keys name one cause each; staleness is counted exactly."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowledger.domain import Reason, causes, staleness
from flowledger.scheduled.sweep import RULES
from flowledger.scheduled.sweep.registry import rule
from flowledger.services.outbox import HoldAlert, delivery_id, rows_for, target_of
from tests.support.builders import T0


def test_cause_keys_differ_per_spell_deadline_and_success() -> None:
    assert (
        staleness.stale_prepared_hold("op", 0, T0).cause_key
        != staleness.stale_prepared_hold("op", 1, T0).cause_key
    )
    later = T0 + timedelta(hours=1)
    assert (
        staleness.overdue_hold(7, "unknown_outcome", T0).cause_key
        != staleness.overdue_hold(7, "unknown_outcome", later).cause_key
    )
    minute = timedelta(minutes=1)
    assert (
        staleness.source_stale_hold("prod", None, minute, 5).cause_key
        != staleness.source_stale_hold("prod", T0, minute, 5).cause_key
    )


@pytest.mark.parametrize(
    ("hold", "reason", "blocking"),
    [
        (staleness.stale_prepared_hold("op", 0, T0), Reason.STALE_PREPARED, False),
        (staleness.execution_stuck_hold("prod", "9", T0), Reason.EXECUTION_STUCK, False),
        (staleness.overdue_hold(1, "x", T0), Reason.OVERDUE, False),
        (
            staleness.source_stale_hold("prod", T0, timedelta(minutes=1), 5),
            Reason.SOURCE_STALE,
            False,
        ),
    ],
)
def test_sweep_holds_carry_their_reason_and_do_not_block(
    hold: object, reason: Reason, blocking: bool
) -> None:
    assert hold.reason is reason and hold.blocking is blocking  # type: ignore[attr-defined]


def test_a_source_is_stale_at_exactly_n_intervals() -> None:
    minute = timedelta(minutes=1)
    due = T0 + 5 * minute
    assert not staleness.source_stale_due(T0, minute, 5, due - timedelta(microseconds=1))
    assert staleness.source_stale_due(T0, minute, 5, due)


def test_outbox_rows_name_a_target_not_the_url() -> None:
    url = "https://hooks.example/services/T000/B000/XXXXSECRET"
    alert = HoldAlert(3, "overdue", False, "op", None, None, "late", T0, T0, refers_to=2)
    (row,) = rows_for(alert, [target_of(url)], T0)
    assert "SECRET" not in row["payload"] and "hooks.example" not in row["payload"]
    assert row["delivery_id"] == delivery_id(3, target_of(url))
    assert row["kind"] == "hold_overdue" and row["next_attempt_at"] == T0


def test_the_overdue_rule_runs_last_and_every_swept_reason_has_its_cause_key_parts() -> None:
    assert RULES[-1].reason is Reason.OVERDUE
    assert [r.order for r in RULES] == sorted({r.order for r in RULES})
    assert {r.reason for r in RULES} <= set(causes.PARTS)


def test_two_rules_cannot_share_a_place_in_the_sweep() -> None:
    taken = RULES[0]
    with pytest.raises(ValueError, match=f"order {taken.order} is taken by {taken.name}"):
        rule(Reason.STALE_PREPARED, order=taken.order)(lambda sweep: 0)
    assert len({r.order for r in RULES}) == len(RULES)
