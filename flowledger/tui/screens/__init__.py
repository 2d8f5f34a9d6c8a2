"""The screens and dialogs. A screen builds no other screen (but the dialogs of its own
actions) and never calls the app: it posts what happened (:mod:`flowledger.tui.messages`) and
the app opens what follows."""
