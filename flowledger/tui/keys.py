"""The keys every screen shares and how the footer shows them: the global keys fixed at its
right, the screen's own actions from its left, as many whole as fit."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import HorizontalGroup
from textual.screen import Screen
from textual.widget import Widget

# The keys that work on every screen, in the order the footer shows them at its right.
GLOBAL_BINDINGS = [
    Binding("question_mark", "help", "Help"),
    Binding("q", "quit", "Quit"),
    Binding("g", "jump", "Go to"),
    Binding("H", "handover", "Handover"),
]
GLOBAL_KEYS = tuple(b.key for b in GLOBAL_BINDINGS)


class KeyHint(Widget):
    """One key in the footer, drawn as Textual's compact footer draws its keys: the key in
    the footer's key colours, then its description; dim when the action is not available
    now. A click presses the key."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"key-hint--key", "key-hint--description"}
    DEFAULT_CSS = """
    KeyHint {
        width: auto;
        height: 1;
        text-wrap: nowrap;
        margin-right: 1;
        background: $footer-item-background;
        .key-hint--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .key-hint--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        &:hover { color: $footer-key-foreground; background: $block-hover-background; }
        &.-disabled { text-style: dim; }
    }
    """

    def __init__(self, key: str, key_display: str, description: str, *, enabled: bool) -> None:
        super().__init__(classes="" if enabled else "-disabled")
        self.set_reactive(Widget.shrink, False)  # whole or not at all: KeysFooter decides
        self.key = key
        self.key_display = key_display
        self.description = description
        self.enabled = enabled

    def render(self) -> Text:
        key = self.get_component_rich_style("key-hint--key")
        described = self.get_component_rich_style("key-hint--description")
        text = Text.assemble((self.key_display, key), (f" {self.description}", described))
        text.stylize_before(self.rich_style)
        return text

    def on_mouse_down(self) -> None:
        if self.enabled:
            self.app.simulate_key(self.key)
        else:
            self.app.bell()


class KeysFooter(Widget):
    """The footer, laid out as k9s lays out its hints: the global keys always at the right,
    where they never move; the screen's actions from the left in their bindings' order, each
    shown whole or not at all (``?`` lists every key). Textual's own footer cuts the last key
    that does not fit and draws over it the command palette's key, which ``ctrl+p`` and ``?``
    cover here. Built again whenever the screen's bindings change (its public signal)."""

    DEFAULT_CSS = """
    KeysFooter {
        layout: horizontal;
        color: $footer-foreground;
        background: $footer-background;
        dock: bottom;
        height: 1;
        scrollbar-size: 0 0;
    }
    KeysFooter .global-keys { dock: right; width: auto; height: 1; }
    KeysFooter .global-keys KeyHint:last-of-type { margin-right: 0; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.bindings_ready = False  # the screen said its bindings once
        self.fitted_to = -1

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def bindings_changed(self, screen: Screen[Any]) -> None:
        self.bindings_ready = True
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self.call_after_refresh(self.recompose)

    def compose(self) -> ComposeResult:
        if not self.bindings_ready:
            return
        self.fitted_to = self.size.width
        shown: dict[str, tuple[Binding, bool]] = {}
        for _, binding, enabled, _tooltip in self.screen.active_bindings.values():
            if binding.show:  # one key an action (``escape,q`` is one binding to the eye)
                shown.setdefault(binding.action.removeprefix("app."), (binding, enabled))
        fixed = [b for b in shown.values() if b[0].key in GLOBAL_KEYS]
        fixed.sort(key=lambda b: GLOBAL_KEYS.index(b[0].key))
        room = self.size.width - sum(self._width(b[0]) for b in fixed) - 1
        with HorizontalGroup(classes="global-keys"):
            for binding, enabled in fixed:
                yield self._key(binding, enabled)
        for binding, enabled in shown.values():
            if binding.key in GLOBAL_KEYS:
                continue
            room -= self._width(binding)
            if room < 0:
                break  # the rest in ``?``; a key cut in half would name another action
            yield self._key(binding, enabled)

    def _width(self, binding: Binding) -> int:
        """The cells a key takes: its key, a space, its description, a margin."""
        return cell_len(self.app.get_key_display(binding)) + cell_len(binding.description) + 2

    def _key(self, binding: Binding, enabled: bool) -> KeyHint:
        return KeyHint(
            binding.key, self.app.get_key_display(binding), binding.description, enabled=enabled
        )

    def on_resize(self, event: events.Resize) -> None:
        if self.bindings_ready and event.size.width != self.fitted_to:
            self.call_after_refresh(self.recompose)
