"""How values read on screen: short hashes, ages, times, and the deadline a person types.

Text that came from a workflow, a tool or a target (names, errors, receipts, ``input_ref``) is
shown through :func:`text` or :func:`clip`: as a literal :class:`~rich.text.Text` (never read
as markup) whose control, ESC and bidi characters are visible escapes
(:func:`flowledger.domain.display.visible`), so nothing it holds can drive the terminal.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from rich.text import Text

from flowledger.connectors import registry
from flowledger.domain import IllegalTransition, is_overdue, times
from flowledger.domain.display import visible
from flowledger.domain.extension import extended_deadline
from flowledger.reports.handover import span

# An operation's state, where it wants a look.
STATE_STYLES = {"dispatching": "bold yellow", "failed": "red", "cancelled": "dim"}


def short_hash(value: str | None, keep: int = 12) -> str:
    """``sha256:0123456789ab…`` — enough to compare by eye, short enough for a column."""
    if not value:
        return "-"
    prefix, _, digest = value.rpartition(":")
    return f"{prefix + ':' if prefix else ''}{digest[:keep]}…" if len(digest) > keep else value


def when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def clock_time(value: datetime | None, now: datetime) -> str:
    """Today's times as ``HH:MM``, other days with the date."""
    if value is None:
        return "-"
    value = value.astimezone(UTC)
    return value.strftime("%H:%M") if value.date() == now.date() else value.strftime("%m-%d %H:%M")


def age(value: datetime | None, now: datetime) -> str:
    return span(now - value).replace(" ", "") if value else "-"


def text(value: Any, style: str = "") -> Text:
    """Outside text for a cell or a field, ``-`` when there is none."""
    return Text("-" if value is None or value == "" else visible(value), style=style)


def deadline_cell(deadline: datetime, now: datetime) -> Text:
    if is_overdue(deadline, now):
        return Text(f"OVERDUE {age(deadline, now)}", style="bold red")
    return Text(f"in {age(now, deadline)}")


def clip(value: str, width: int) -> str:
    """Outside text shown (escapes included) in at most ``width`` characters."""
    value = visible(value)
    return value if len(value) <= width else value[: width - 1] + "…"


def middle(value: str, width: int) -> str:
    """``value`` (made :func:`visible`) in ``width`` characters, cut in the middle: ids keep
    their distinctive end."""
    value = visible(value)
    if len(value) <= width:
        return value
    if width < 2:
        return value[:width]
    head = (width - 1) // 2
    return value[:head] + "…" + value[len(value) - (width - 1 - head) :]


def deadline_forms(now: datetime) -> str:
    """What the deadline field takes, its ISO example always in the future (tomorrow)."""
    example = (now.astimezone(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT18:00")
    return (
        f"+30m, +2h, +1d (past the current deadline), 18:00 or 9am (the next one), tomorrow "
        f"09:00, or an ISO time such as {example} (UTC)"
    )


def parse_deadline(value: str, now: datetime) -> datetime:
    """A deadline as typed (:func:`flowledger.domain.times.read`, a future time meant, in
    UTC): ``+30m``, ``+2h``, ``+1d``, ``18:00`` or ``9am`` (the next one), ``today 18:00`` /
    ``tomorrow 09:00``, or an ISO 8601 time (UTC unless it names its offset)."""
    try:
        return times.read(value, now, UTC, ahead=True)
    except times.Unreadable:
        raise ValueError(
            f"cannot read {value!r} as a deadline: give {deadline_forms(now)}"
        ) from None


def future_deadline(value: str, now: datetime) -> datetime:
    """:func:`parse_deadline`, refusing a time that is not after ``now``."""
    deadline = parse_deadline(value, now)
    if deadline <= now:
        raise ValueError(f"{when(deadline)} UTC is in the past; the new deadline must be later")
    return deadline


def new_deadline(value: str, current: datetime, now: datetime) -> tuple[datetime, timedelta | None]:
    """The deadline ``value`` gives a hold whose deadline is ``current``, and the extension
    it names when it is relative (``+2h``: counted from the current deadline, by the rule
    the services apply, :func:`flowledger.domain.extension.extended_deadline`). A value that
    would not move the deadline later is refused with the rule's words."""
    by = times.span(value, ahead=True)
    try:
        if by is not None:
            return extended_deadline(current, now, by=by), by
        return extended_deadline(current, now, until=parse_deadline(value, now)), None
    except IllegalTransition as exc:
        raise ValueError(str(exc)) from None


def execution_url(kind: str | None, base_url: str | None, execution: dict[str, Any]) -> str | None:
    """The tool's own page for an execution, when its kind has one and its source a base URL."""
    return registry.execution_url(
        kind, base_url, execution.get("workflow_id"), execution["external_id"]
    )
