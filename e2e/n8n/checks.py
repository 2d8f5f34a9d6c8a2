"""What the end-to-end run checks with: one line printed per check, and waiting for a
condition."""

from __future__ import annotations

import time
from collections.abc import Callable
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


def wait_for(what: Callable[[], Any], timeout: float = 30.0, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every)
