"""How a person extends a hold's deadline: the one rule the terminal UI, the CLI and the API
share (the services apply it in the transaction that writes the new deadline)."""

from __future__ import annotations

from datetime import datetime, timedelta

from flowledger.domain.model import IllegalTransition
from flowledger.domain.times import for_people


def _shown(value: datetime) -> str:
    return for_people(value)


def extended_deadline(
    current: datetime,
    now: datetime,
    *,
    until: datetime | None = None,
    by: timedelta | None = None,
) -> datetime:
    """The deadline a hold gets when a person extends it: ``until`` names it; ``by`` counts
    from the current deadline, or from ``now`` once that has passed (an overdue hold gets the
    whole extension). Extending never shortens: a deadline not later than the current one,
    or not after ``now``, is refused, saying which."""
    if (until is None) == (by is None):
        raise ValueError("give the new deadline or how much later it is, not both")
    if by is not None:
        if by <= timedelta(0):
            raise IllegalTransition(
                "an extension must move the deadline later", code="deadline_not_later"
            )
        until = max(current, now) + by
    assert until is not None
    if until <= now:
        raise IllegalTransition(
            f"{_shown(until)} is in the past; the new deadline must be later",
            code="deadline_in_past",
        )
    if until <= current:
        raise IllegalTransition(
            f"{_shown(until)} is not later than the current deadline {_shown(current)}: "
            "extending never moves a deadline earlier",
            code="deadline_not_later",
        )
    return until
