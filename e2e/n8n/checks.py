"""What the end-to-end run checks with: one line printed per check, and waiting for a
condition."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []
        self.passed = 0

    def __call__(self, name: str, ok: bool, detail: str = "") -> bool:
        print(f"{'ok  ' if ok else 'FAIL'}  {name}{f'  ({detail})' if detail else ''}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
        return ok

    @contextmanager
    def ending_early(self) -> Iterator[None]:
        """A broken step ends the run as one failed check that says which."""
        try:
            yield
        except Exception as exc:
            self(f"the run ended early: {type(exc).__name__}: {exc}", False)

    def summary(self, run: str, started: float) -> int:
        """One line of totals for ``run`` begun at ``started`` (monotonic); the exit status."""
        took = time.monotonic() - started
        print(f"{run}: {self.passed} passed, {len(self.failed)} failed in {took:.0f} s")
        return 1 if self.failed else 0


def wait_for(what: Callable[[], Any], timeout: float = 30.0, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every)
