"""A ``go`` the workflow gives back unwritten (``release``): an n8n Guard that stops on one
item's hold releases the items it let through and did not pass on. The operation is
``prepared`` again without a hold, the attempt ends ``unsent`` and does not count against
``max_attempts``; only the execution that dispatched it may release it."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from flowledger.domain import FailOutcome, IllegalTransition
from flowledger.services.ledger import Ledger
from flowledger.storage.models import Attempt, Event, Hold, table
from flowledger.storage.reads.replay import deep_verify
from tests.support.builders import req
from tests.support.database import snapshot

OP = "invoice:INV-42:send"
ATTEMPTS, EVENTS, HOLDS = table(Attempt), table(Event), table(Hold)


def _rows(ledger: Ledger, statement: sa.Select) -> list[tuple]:
    with ledger.store.reader.connect() as conn:
        return [tuple(r) for r in conn.execute(statement).all()]


def _release(ledger: Ledger, execution: str = "exec-1", run_index: int | None = 0) -> str:
    reason = "invoice:A0:send was held (input_mismatch): the node stopped"
    call = ledger.release(OP, execution_id=execution, run_index=run_index, reason=reason)
    return call.run("wf").state


def test_a_released_go_is_prepared_again_with_no_hold_and_the_next_execution_goes(
    ledger: Ledger,
) -> None:
    assert ledger.dispatch(OP, req("exec-1")).run("wf").decision == "go"

    assert _release(ledger) == "prepared"

    assert _rows(ledger, sa.select(HOLDS.c.reason)) == []
    assert _rows(ledger, sa.select(ATTEMPTS.c.number, ATTEMPTS.c.outcome, ATTEMPTS.c.error)) == [
        (1, "unsent", "invoice:A0:send was held (input_mismatch): the node stopped")
    ]
    kinds = _rows(ledger, sa.select(EVENTS.c.kind).order_by(EVENTS.c.seq))
    assert kinds[-2:] == [("dispatched",), ("dispatch_released",)]
    again = ledger.dispatch(OP, req("exec-2")).run("wf")
    assert (again.decision, again.attempt) == ("go", 2)


def test_released_attempts_do_not_use_up_the_operation_s_attempts(ledger: Ledger) -> None:
    for n in range(ledger.max_attempts + 2):
        assert ledger.dispatch(OP, req(f"exec-{n}")).run("wf").decision == "go"
        _release(ledger, f"exec-{n}")
    last = ledger.dispatch(OP, req("exec-last")).run("wf")
    assert (last.decision, last.attempt) == ("go", ledger.max_attempts + 3)
    # Nothing held; only the executions' coming all at once is noted, as twin triggers.
    assert _rows(ledger, sa.select(HOLDS.c.reason)) == [("duplicate_trigger",)]


def test_rejected_attempts_still_count_beside_released_ones(ledger: Ledger) -> None:
    ledger.dispatch(OP, req("exec-r")).run("wf")
    _release(ledger, "exec-r")
    for n in range(ledger.max_attempts):
        ledger.dispatch(OP, req(f"exec-{n}")).run("wf")
        ledger.fail(OP, FailOutcome.REJECTED, "422", execution_id=f"exec-{n}").run("wf")
    held = ledger.dispatch(OP, req("exec-next")).run("wf")
    assert (held.decision, held.reason) == ("hold", "max_attempts")


def test_only_the_execution_and_run_that_dispatched_it_may_release_it(ledger: Ledger) -> None:
    ledger.dispatch(OP, req("exec-1")).run("wf")
    before = snapshot(ledger.store)
    said = []
    for execution, run_index in (("exec-2", 0), ("exec-1", 1), ("exec-1", None)):
        with pytest.raises(IllegalTransition) as refused:
            _release(ledger, execution, run_index)
        assert refused.value.code == "not_dispatched_by_this_execution"
        assert "only the execution that dispatched it can release it" in str(refused.value)
        said.append(str(refused.value))
    assert "by execution exec-1 (run 0), not exec-1 (no run index):" in said[2]
    assert snapshot(ledger.store) == before


def test_a_release_of_a_prepared_operation_changes_nothing(ledger: Ledger) -> None:
    ledger.dispatch(OP, req("exec-1")).run("wf")
    _release(ledger)
    before = snapshot(ledger.store)
    assert _release(ledger) == "prepared"  # its first answer was lost, say
    assert snapshot(ledger.store) == before


def test_a_confirmed_operation_cannot_be_released(ledger: Ledger) -> None:
    ledger.dispatch(OP, req("exec-1")).run("wf")
    ledger.confirm(OP, "R-1", execution_id="exec-1").run("wf")
    with pytest.raises(IllegalTransition, match="only a dispatched operation can be released"):
        _release(ledger)


@pytest.mark.parametrize("held_by", ["error hook", "unknown outcome"])
def test_no_release_once_a_person_must_find_out_whether_it_was_written(
    ledger: Ledger, held_by: str
) -> None:
    """The error hook (``execution_failed``) or an unknown outcome holds the operation: the
    question whether it was written is a person's to answer, with evidence."""
    ledger.dispatch(OP, req("exec-1")).run("wf")
    if held_by == "error hook":
        ledger.execution_failed("exec-1", "n8n execution exec-1 failed").run("hook")
    else:
        ledger.fail(OP, FailOutcome.UNKNOWN, "timeout", execution_id="exec-1").run("wf")
    before = snapshot(ledger.store)
    with pytest.raises(IllegalTransition) as refused:
        _release(ledger)
    assert refused.value.code == "held_for_a_person"
    assert "whether it was written is for a person to decide" in str(refused.value)
    assert snapshot(ledger.store) == before


def test_released_dispatches_replay_to_the_same_tables(ledger: Ledger) -> None:
    for n in range(3):
        ledger.dispatch(OP, req(f"exec-{n}")).run("wf")
        _release(ledger, f"exec-{n}")
    ledger.dispatch(OP, req("exec-9")).run("wf")
    ledger.confirm(OP, "R-9", execution_id="exec-9").run("wf")
    with ledger.store.reader.connect() as conn:
        found = deep_verify(conn)
    assert found.ok, found.findings
