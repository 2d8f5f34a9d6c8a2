"""End-to-end checks against real workflow tools; opt-in, never part of CI."""
