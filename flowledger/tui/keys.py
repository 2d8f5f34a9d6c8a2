"""The keys every screen shares and how the footer shows them: the global keys fixed at its
right, the screen's own actions from its left, as many whole as fit."""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import HorizontalGroup
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

# The keys that work on every screen, in the order the footer shows them at its right.
GLOBAL_BINDINGS = [
    Binding("question_mark", "help", "Help"),
    Binding("q", "quit", "Quit"),
    Binding("g", "jump", "Go to"),
    Binding("H", "handover", "Handover"),
]
GLOBAL_KEYS = tuple(b.key for b in GLOBAL_BINDINGS)


class KeysFooter(Footer):
    """Textual's footer, laid out as k9s lays out its hints: the global keys always at the
    right, where they never move; the screen's actions from the left in their bindings' order,
    each shown whole or not at all (``?`` lists every key). Textual's own footer cuts the last
    key that does not fit and draws over it the command palette's key, which ``ctrl+p`` and
    ``?`` cover here."""

    DEFAULT_CSS = """
    KeysFooter .global-keys { dock: right; width: auto; height: 1; }
    KeysFooter .global-keys FooterKey:last-of-type { margin-right: 0; }
    """

    def __init__(self) -> None:
        super().__init__(compact=True, show_command_palette=False)
        self.fitted_to = -1

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        self.fitted_to = self.size.width
        shown: dict[str, tuple[Binding, bool, str]] = {}
        for _, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show:  # one key an action (``escape,q`` is one binding to the eye)
                shown.setdefault(binding.action.removeprefix("app."), (binding, enabled, tooltip))
        fixed = [b for b in shown.values() if b[0].key in GLOBAL_KEYS]
        fixed.sort(key=lambda b: GLOBAL_KEYS.index(b[0].key))
        room = self.size.width - sum(self._width(b[0]) for b in fixed) - 1
        with HorizontalGroup(classes="global-keys"):
            for binding, enabled, tooltip in fixed:
                yield self._key(binding, enabled, tooltip)
        for binding, enabled, tooltip in shown.values():
            if binding.key in GLOBAL_KEYS:
                continue
            room -= self._width(binding)
            if room < 0:
                break  # the rest in ``?``; a key cut in half would name another action
            yield self._key(binding, enabled, tooltip)

    def _width(self, binding: Binding) -> int:
        """The cells a compact key takes: its key, a space, its description, a margin."""
        return cell_len(self.app.get_key_display(binding)) + cell_len(binding.description) + 2

    def _key(self, binding: Binding, enabled: bool, tooltip: str) -> FooterKey:
        key = FooterKey(
            binding.key,
            self.app.get_key_display(binding),
            binding.description,
            binding.action,
            disabled=not enabled,
            tooltip=tooltip,
        )
        return key.data_bind(compact=Footer.compact)

    def on_resize(self, event: events.Resize) -> None:
        if self._bindings_ready and event.size.width != self.fitted_to:
            self.call_after_refresh(self.recompose)
