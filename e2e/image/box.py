"""The ledger's image running as a container of the test's own: on the host's network (so that
it reaches the host's PostgreSQL, and the test reaches it), its ledger in a named volume, its
port set by a mounted ``flowledger.toml`` (so the image's HEALTHCHECK asks the same port)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from e2e.image.engine import Engine
from e2e.local_n8n import free_port

CONFIG = "/etc/flowledger/flowledger.toml"


@dataclass
class Box:
    engine: Engine
    image: str
    name: str
    folder: Path  # where its flowledger.toml is written, on the host
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def volume(self) -> str:
        return f"{self.name}-data"

    def create(self) -> None:
        """A fresh container over a fresh volume, not started."""
        self.engine.remove(self.name)
        self.engine("volume", "rm", "--force", self.volume, check=False)
        settings = self.folder / f"{self.name}.toml"
        settings.write_text(f"[receiver]\nport = {self.port}\n", encoding="utf-8")
        settings.chmod(0o644)  # read by the image's user
        env = {"FLOWLEDGER_CONFIG": CONFIG, **self.env}
        self.engine(
            "create",
            "--name",
            self.name,
            "--network",
            "host",
            "--volume",
            f"{self.volume}:/data",
            "--volume",
            f"{settings}:{CONFIG}:ro",
            *[arg for key, value in env.items() for arg in ("--env", f"{key}={value}")],
            self.image,
        )

    def start(self) -> float:
        """Start it and wait until its HEALTHCHECK passes: the seconds from start to healthy."""
        started = time.monotonic()
        self.engine("start", self.name)
        deadline = started + 60
        while not self.engine.healthy(self.name):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not healthy after 60 s:\n{self.logs()[-2000:]}")
            if self.engine.inspect(self.name, "{{.State.Running}}") != "true":
                raise RuntimeError(f"{self.name} exited:\n{self.logs()[-2000:]}")
            time.sleep(0.2)
        return time.monotonic() - started

    def stop(self) -> tuple[float, int]:
        """SIGTERM (the engine's stop, which would SIGKILL after 10 s): the seconds it took and
        the exit status (137 when it had to be killed)."""
        started = time.monotonic()
        self.engine("stop", "--time", "10", self.name)
        took = time.monotonic() - started
        return took, int(self.engine.inspect(self.name, "{{.State.ExitCode}}"))

    def put_ledger(self, ledger: Path) -> None:
        """Put ``ledger`` (a SQLite file) in the volume as its ledger, owned by the image's
        user, as a container of the image's that ran it would have left it."""
        self.engine(
            "run", "--rm", "--user", "0", "--entrypoint", "sh",
            "--volume", f"{self.volume}:/data", "--volume", f"{ledger}:/in/ledger.db:ro",
            self.image, "-c",
            "install -o flowledger -g flowledger -m 0600 /in/ledger.db /data/flowledger.db",
        )  # fmt: skip

    def flowledger(self, *args: str, check: bool = True) -> str:
        """A command through ``exec``, as an operator runs it."""
        return self.engine.exec(self.name, "flowledger", *args, check=check)

    def token(self, name: str, scope: str) -> str:
        return self.flowledger("token", "create", "--name", name, "--scope", scope).splitlines()[1]

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=10
        )

    def logs(self) -> str:
        return self.engine.logs(self.name)

    def remove(self) -> None:
        self.engine.remove(self.name)
        self.engine("volume", "rm", "--force", self.volume, check=False)
