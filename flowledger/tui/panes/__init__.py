"""The lists on the main screen, a module each, and the paged list they share
(:mod:`flowledger.tui.panes.listing`)."""
