"""Prefect 3.9 in a venv of its own (never the ledger's), and ``prefect server start`` on
SQLite on a free loopback port, with an auth string so that the ledger must log in."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from e2e.local_ledger import end_process
from e2e.local_n8n import free_port

VERSION = "prefect==3.9.*"
VENV = Path(os.environ.get("FLOWLEDGER_E2E_PREFECT_VENV", "/tmp/flowledger-e2e-prefect-venv"))
USER, PASSWORD = "ledger", "e2e-prefect-pass"


def prefect_python() -> Path:
    """The venv's Python, Prefect installed into it first when it is not there yet."""
    python = VENV / "bin" / "python"
    if not (VENV / "bin" / "prefect").exists():
        base = shutil.which("python3.11") or shutil.which("python3") or "python3"
        subprocess.run([base, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", VERSION], check=True)
    return python


@dataclass
class PrefectServer:
    home: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def env(self) -> dict[str, str]:
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")},
            "PREFECT_HOME": str(self.home),
            "PREFECT_API_URL": self.api,
            "PREFECT_API_AUTH_STRING": f"{USER}:{PASSWORD}",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_LOGGING_LEVEL": "WARNING",
        }

    def start(self, python: Path) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        env = {
            **self.env(),
            "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{self.home}/prefect.db",
            "PREFECT_UI_ENABLED": "false",
            "PREFECT_SERVER_API_AUTH_STRING": f"{USER}:{PASSWORD}",
        }
        self.proc = subprocess.Popen(
            [
                str(python.parent / "prefect"),
                "server",
                "start",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            env=env,
            stdout=open(self.home / "server.log", "ab"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.api}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"prefect server did not answer (see {self.home}/server.log)")

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.api, auth=(USER, PASSWORD), timeout=30)

    def stop(self) -> None:
        end_process(self.proc)
