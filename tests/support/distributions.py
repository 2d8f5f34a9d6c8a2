"""What an installed distribution brings with it: for the tests that run code on a Python with
nothing but one package and its dependencies."""

from __future__ import annotations

import importlib.metadata
import re

from packaging.requirements import Requirement


def dependency_closure(name: str) -> set[str]:
    """``name`` and every distribution it requires, at any depth (extras left out)."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        dist = todo.pop()
        key = re.sub(r"[-_.]+", "-", dist).lower()
        if key in seen:
            continue
        seen.add(key)
        for text in importlib.metadata.requires(dist) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen
