"""The Events tab's data column: what a person scans for comes first."""

from flowledger.tui.panes.events import data_order


def test_the_decision_and_reason_lead_and_the_rest_follow_alphabetically() -> None:
    dispatched = {
        "deadline": "2026-11-02T15:00:00+00:00",
        "input_ref": "s3://in/1",
        "attempt": 1,
        "decision": "hold",
        "reason": "in_flight",
        "execution_id": "7421",
        "approval": None,
    }
    assert data_order(dispatched) == [
        "decision",
        "reason",
        "attempt",
        "deadline",
        "execution_id",
        "input_ref",
    ]


def test_keys_without_a_value_are_left_out() -> None:
    assert data_order({"receipt": None, "owner": "zoe"}) == ["owner"]
