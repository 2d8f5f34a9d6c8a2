"""The wheel, built as a release would be: from a copy of the tree (setuptools leaves build/
and *.egg-info in the tree it builds), with no build isolation and no network."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation")
_CACHES = shutil.ignore_patterns("__pycache__", "*.pyc")


def build_wheel(workdir: Path) -> Path:
    """Copy what the build reads into ``workdir/src``, build the wheel into ``workdir``, and
    return its path."""
    src = workdir / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "flowledger", src / "flowledger", ignore=_CACHES)
    subprocess.run(
        [*PIP_WHEEL, "--wheel-dir", str(workdir), str(src)], check=True, capture_output=True
    )
    (wheel,) = workdir.glob("flowledger-*.whl")
    return wheel


def build_client_wheel(workdir: Path) -> Path:
    """The ``flowledger-client`` wheel (``clients/python``), built the same way; its link to
    ``flowledger/client`` is copied as the files it points at, as an sdist would hold them."""
    src = workdir / "client-src"
    shutil.copytree(ROOT / "clients" / "python", src, ignore=_CACHES, symlinks=False)
    subprocess.run(
        [*PIP_WHEEL, "--wheel-dir", str(workdir), str(src)], check=True, capture_output=True
    )
    (wheel,) = workdir.glob("flowledger_client-*.whl")
    return wheel
