"""A workflow call's answer is written field by field: the same bytes as the general encoder."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from flowledger.receiver.api.reply import dumps
from flowledger.receiver.engine.idempotency import answer_json, settled
from flowledger.services.values import Answer

_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
_MAYBE = st.none() | _TEXT


@given(_TEXT, _TEXT, _MAYBE, st.integers(), _MAYBE, _MAYBE, st.none() | st.integers())
def test_the_same_bytes_as_the_general_encoder(
    operation_id: str,
    state: str,
    decision: str | None,
    attempt: int,
    reason: str | None,
    receipt: str | None,
    hold_id: int | None,
) -> None:
    answer = Answer(operation_id, state, decision, attempt, reason, receipt, [1], hold_id)
    assert answer_json(answer) == dumps(answer.as_dict())
    assert settled(answer).body == dumps(answer.as_dict())


def test_unusual_types_take_the_general_way() -> None:
    for answer in (
        Answer("op", "confirmed", attempt=True),  # a bool is an int to JSON's encoder too
        Answer("op", "confirmed", attempt=2.0),  # type: ignore[arg-type]
        Answer("op", "dispatching", "hold", hold_id=True),
    ):
        assert answer_json(answer) == dumps(answer.as_dict())


def test_a_pinned_answer() -> None:
    answer = Answer("inv:1", "dispatching", "go", 1, None, "Müller\n", [])
    expected = (
        b'{"attempt":1,"decision":"go","hold_id":null,"operation_id":"inv:1","reason":null,'
        b'"receipt":"M\\u00fcller\\n","state":"dispatching"}'
    )
    assert answer_json(answer) == expected
