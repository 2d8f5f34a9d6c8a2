"""What a tab of the main screen is, and what the screen asks of the pane under it. The tabs
themselves, in order, are listed once, with their panes (:data:`flowledger.tui.panes.TABS`):
the app binds their keys and hands them to the main screen, the command palette offers them
and the help lists them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from textual.containers import Vertical


class Pane(Vertical):
    """A tab's content. The main screen reloads it, and runs the tab's own keys (``/``,
    ``s``, ``v``…) as the pane's actions (``action_filter``, ``action_sort``…) where the pane
    has them: it never needs to know which pane it is."""

    # Whether its rows are holds a person can act on (the decisions' keys work there).
    HOLDS: ClassVar[bool] = False

    def reload(self) -> object:  # a worker's handle, for some
        raise NotImplementedError

    def load_if_never_loaded(self) -> None:
        raise NotImplementedError

    def current(self) -> dict[str, Any] | None:
        """The row under the cursor, if any."""
        return None


@dataclass(frozen=True)
class Tab:
    name: str  # its pane's id (the tab's own is ``tab-<name>``)
    title: str
    key: str
    pane: Callable[..., Pane]  # called with the context and ``id=name``
