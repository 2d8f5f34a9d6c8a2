"""The container engine the image test drives (podman, or docker), and the base image it builds
on: ``BASE`` when given, else the Containerfile's default when it can be pulled, else one made
here from Debian with debootstrap and kept (no registry needed: only Debian's mirror)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from e2e.local_n8n import ROOT

OFFICIAL = "docker.io/library/python:3.11-slim-trixie"  # the Containerfile's default BASE
DEBIAN_BASE = "localhost/flowledger-base:bookworm"
DEBIAN_PACKAGES = "python3,python3-venv,ca-certificates"
# A host that reaches PyPI through a TLS-inspecting proxy trusts that proxy in this bundle; the
# build's pip needs it too.
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


class Unavailable(Exception):
    """No container engine, or no base image can be had."""


@dataclass(frozen=True)
class Engine:
    command: list[str]

    @property
    def podman(self) -> bool:
        return Path(self.command[0]).name == "podman"

    def __call__(self, *args: str, check: bool = True, timeout: float = 600) -> str:
        done = subprocess.run(
            [*self.command, *args], capture_output=True, text=True, timeout=timeout
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{shlex.join(args[:3])}… failed: {done.stderr.strip()[-600:]}")
        return done.stdout

    def ok(self, *args: str) -> bool:
        return subprocess.run([*self.command, *args], capture_output=True).returncode == 0

    def inspect(self, what: str, template: str) -> str:
        return self("inspect", "--format", template, what).strip()

    def healthy(self, container: str) -> bool:
        """Whether the image's HEALTHCHECK passes now. podman runs it on a systemd timer, which
        a machine without systemd lacks: ``healthcheck run`` runs it here and records it."""
        if self.podman:
            return self.ok("healthcheck", "run", container)
        return self.inspect(container, "{{.State.Health.Status}}") == "healthy"

    def health_status(self, container: str) -> str:
        field = ".State.Healthcheck.Status" if self.podman else ".State.Health.Status"
        return self.inspect(container, "{{" + field + "}}")

    def exec(self, container: str, *args: str, check: bool = True) -> str:
        return self("exec", container, *args, check=check)

    def logs(self, container: str) -> str:
        done = subprocess.run([*self.command, "logs", container], capture_output=True, text=True)
        return done.stdout + done.stderr

    def remove(self, *containers: str) -> None:
        subprocess.run([*self.command, "rm", "-f", *containers], capture_output=True)

    def size(self, image: str) -> int:
        return int(json.loads(self("image", "inspect", image))[0]["Size"])


def find_engine() -> Engine:
    """``IMAGE_ENGINE`` (a command line, such as ``podman --runtime runc``), else podman, else
    docker."""
    given = os.environ.get("IMAGE_ENGINE")
    if given:
        return Engine(shlex.split(given))
    for name in ("podman", "docker"):
        found = shutil.which(name)
        if found and subprocess.run([found, "info"], capture_output=True).returncode == 0:
            return Engine([found])
    raise Unavailable(
        "neither podman nor docker answers `info`; install one (see docs/production.md)"
    )


def base_image(engine: Engine, say: Callable[[str], None] = print) -> str:
    """``BASE`` when given; else the official image when it is here or can be pulled; else
    a Debian bookworm one with Python 3.11, made once with debootstrap and kept."""
    given = os.environ.get("BASE")
    if given:
        return given
    if engine.ok("image", "inspect", OFFICIAL) or engine.ok("pull", "--quiet", OFFICIAL):
        return OFFICIAL
    if engine.ok("image", "inspect", DEBIAN_BASE):
        return DEBIAN_BASE
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        raise Unavailable(
            f"{OFFICIAL} cannot be pulled, and making {DEBIAN_BASE} needs debootstrap, as root; "
            "or give BASE=an image with python3 and its venv module"
        )
    say(f"      {OFFICIAL} cannot be pulled: making {DEBIAN_BASE} with debootstrap (minutes)")
    with tempfile.TemporaryDirectory(prefix="flowledger-base-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={DEBIAN_PACKAGES}",
                "bookworm",
                str(rootfs),
            ],
            check=True,
            capture_output=True,
        )
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(
            [*engine.command, "import", "-", DEBIAN_BASE],
            stdin=tar.stdout,
            check=True,
            capture_output=True,
        )
        tar.wait()
    return DEBIAN_BASE


def build(engine: Engine, base: str, tag: str) -> float:
    """Build the image from the checkout's Containerfile; the seconds it took."""
    args = [
        "build",
        "--file",
        str(ROOT / "Containerfile"),
        "--tag",
        tag,
        "--build-arg",
        f"BASE={base}",
        "--network",
        "host",
    ]
    if engine.podman:
        args += ["--format", "docker"]  # keeps the HEALTHCHECK (OCI's format has none)
        if HOST_CA.is_file():
            args += ["--volume", f"{HOST_CA}:{HOST_CA}:ro"]
    started = time.monotonic()
    engine(*args, str(ROOT), timeout=1800)
    return time.monotonic() - started
