"""The sweep finds what has no hold yet by building cause keys in SQL; the rules build them in
Python. Both come from one table (``flowledger.domain.causes.PARTS``); this pins that they give the
same text on both databases, for any ids."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowledger.domain import Reason
from flowledger.domain.causes import PARTS, cause_key
from flowledger.storage.due import sql_cause_key
from flowledger.storage.engine import Store

TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=40,
)
INT = st.integers(min_value=0, max_value=2**31 - 1)
# The parts the sweep's SQL builds keys from; times are formatted in Python only.
INTEGER_PARTS = {"attempt", "hold_id"}
SQL_REASONS = [r for r, (_, names) in PARTS.items() if not {"expires_at", "deadline"} & set(names)]


def _values(reason: Reason) -> st.SearchStrategy[dict[str, Any]]:
    _, names = PARTS[reason]
    return st.fixed_dictionaries({n: INT if n in INTEGER_PARTS else TEXT for n in names})


@pytest.mark.parametrize("reason", SQL_REASONS, ids=lambda r: r.value)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_sql_and_python_build_the_same_cause_key(
    store: Store, reason: Reason, data: st.DataObject
) -> None:
    values = data.draw(_values(reason))
    columns = {
        name: sa.literal(value, sa.Integer if name in INTEGER_PARTS else sa.String)
        for name, value in values.items()
    }
    with store.reader.connect() as conn:
        built = conn.execute(sa.select(sql_cause_key(reason, **columns))).scalar_one()
    assert built == cause_key(reason, **values)


def test_a_cause_key_takes_exactly_its_named_parts() -> None:
    with pytest.raises(TypeError, match="unknown_outcome cause key takes"):
        cause_key(Reason.UNKNOWN_OUTCOME, operation_id="op-1")
    with pytest.raises(TypeError, match="unknown_outcome cause key takes"):
        sql_cause_key(Reason.UNKNOWN_OUTCOME, operation_id=sa.literal("op-1"))
