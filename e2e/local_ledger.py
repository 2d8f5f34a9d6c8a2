"""``flowledger serve`` on a fresh SQLite ledger beside a local n8n, and the CLI run on it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from e2e.local_n8n import ROOT, N8n, free_port


def end_process(proc: subprocess.Popen[Any] | None) -> None:
    """SIGTERM ``proc`` if it still runs, and SIGKILL it after 20 s."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@dataclass
class LocalLedger:
    """``flowledger serve`` on a fresh SQLite ledger, with a flowledger.toml naming the n8n."""

    folder: Path
    n8n: N8n | None = None
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    sources: str = ""  # more [[sources]] tables for flowledger.toml
    env_extra: dict[str, str] = field(default_factory=dict)  # their secrets

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def db(self) -> str:
        return str(self.folder / "ledger.db")

    def env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "FLOWLEDGER_DB": self.db,
            # Keys input hashes, and lets tokens that sign their requests be made.
            "FLOWLEDGER_SECRET": "e2e-" + "7" * 40,
        }
        env.pop("FLOWLEDGER_CONFIG", None)
        if self.n8n is not None:
            env["E2E_N8N_API_KEY"] = self.n8n.api_key
        return {**env, **self.env_extra}

    def cli(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "flowledger.cli", *args],
            cwd=self.folder,
            env=self.env(),
            capture_output=True,
            text=True,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"flowledger {' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done.stdout + done.stderr

    def start(self) -> None:
        n8n_source = (
            f'[[sources]]\nname = "local-n8n"\nkind = "n8n"\nbase_url = "{self.n8n.url}"\n'
            'api_key_env = "E2E_N8N_API_KEY"\n\n'
            if self.n8n is not None
            else ""
        )
        (self.folder / "flowledger.toml").write_text(
            f"{n8n_source}{self.sources}[receiver]\nport = {self.port}\n", encoding="utf-8"
        )
        self.cli("init")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "flowledger.cli",
                "serve",
                "--no-access-log",
                "--port",
                str(self.port),
            ],
            cwd=self.folder,
            env=self.env(),
            stdout=subprocess.DEVNULL,
            stderr=open(self.folder / "serve.log", "ab"),  # noqa: SIM115
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            time.sleep(0.3)
        raise RuntimeError("flowledger serve did not become ready")

    def stop(self) -> None:
        end_process(self.proc)
        self.proc = None

    def token(self, name: str, scope: str) -> str:
        return (
            self.cli("token", "create", "--name", name, "--scope", scope).strip().splitlines()[-1]
        )

    def signing_token(self, name: str) -> tuple[str, str]:
        """A write token that must sign its requests, and its signing secret."""
        printed = self.cli("token", "create", "--name", name, "--scope", "write", "--signing")
        lines = printed.splitlines()
        after = [lines[n + 1] for n, text in enumerate(lines[:-1]) if "only this once" in text]
        if len(after) != 2:
            raise RuntimeError(f"flowledger token create --signing printed {printed!r}")
        return after[0].strip(), after[1].strip()

    def operation(self, token: str, operation_id: str) -> dict[str, Any] | None:
        from urllib.parse import quote

        answer = httpx.get(
            f"{self.url}/v1/operations/{quote(operation_id, safe='')}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        return None if answer.status_code == 404 else dict(answer.json())
