"""What the image test checks on one running container: the README's first look through it,
SIGTERM under load (nothing acknowledged lost, stopped within 10 s), a restart on the same
data, its user, its logs, and the terminal UI through ``exec``."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from e2e.image.box import Box
from e2e.n8n.checks import Checks, wait_for

INVOICE = "invoice:INV-42:send"


def first_look(check: Checks, box: Box, label: str) -> None:
    """The README's first look: a token made through ``exec``, dispatch, confirm, ``show``."""
    token = box.token("first-look", "write")
    with box.client(token) as client:
        body = {
            "input": {"invoice": "INV-42", "amount": 1200},
            "processing_version": "v1",
            "execution_id": "11",
            "run_index": 0,
        }
        go = client.post(f"/v1/operations/{INVOICE}/dispatch", json=body).json()
        confirmed = client.post(
            f"/v1/operations/{INVOICE}/confirm", json={"receipt": "msg-6017", "execution_id": "11"}
        ).json()
        again = client.post(
            f"/v1/operations/{INVOICE}/dispatch", json={**body, "execution_id": "12"}
        ).json()
    check(
        f"{label}: first look: go, confirmed, then skip with the receipt",
        (go["decision"], confirmed["state"], again["decision"], again["receipt"])
        == ("go", "confirmed", "skip", "msg-6017"),
        f"{go['decision']}, {confirmed['state']}, {again['decision']}",
    )
    shown = box.flowledger("show", INVOICE)
    check(
        f"{label}: `flowledger show` through exec shows the receipt",
        "msg-6017" in shown and "confirmed" in shown,
    )


@dataclass
class Load:
    """Workers dispatching and confirming operations of their own, each answer kept: an
    acknowledged dispatch (``go``) and an acknowledged confirm must both be found later."""

    box: Box
    token: str
    workers: int = 8
    dispatched: set[str] = field(default_factory=set)
    confirmed: set[str] = field(default_factory=set)
    refused: int = 0  # answered, but not 200 (503 while stopping)
    unanswered: int = 0  # no answer (the receiver gone)
    done: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for n in range(self.workers):
            thread = threading.Thread(target=self._work, args=(n,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def stop(self) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(30)

    def _work(self, worker: int) -> None:
        with self.box.client(self.token) as client:
            n = 0
            while not self.done.is_set():
                n += 1
                op = f"load:{worker}:{n}"
                body = {"input": {"n": n}, "processing_version": "v1", "execution_id": op}
                if self._acked(client, f"/v1/operations/{op}/dispatch", body, "decision", "go"):
                    self.dispatched.add(op)
                    done = {"receipt": f"r-{op}", "execution_id": op}
                    if self._acked(
                        client, f"/v1/operations/{op}/confirm", done, "state", "confirmed"
                    ):
                        self.confirmed.add(op)

    def _acked(self, client: httpx.Client, path: str, body: object, key: str, value: str) -> bool:
        try:
            answer = client.post(path, json=body)
        except httpx.HTTPError:
            self.unanswered += 1
            time.sleep(0.05)  # pacing a dead port, not synchronising
            return False
        if answer.status_code != 200:
            self.refused += 1
            return False
        return bool(answer.json().get(key) == value)


def sigterm_under_load(check: Checks, box: Box, label: str) -> tuple[float, Load]:
    """SIGTERM while workers write: stopped by itself within 10 s (not killed)."""
    load = Load(box, box.token("load", "write"))
    load.start()
    try:
        wait_for(lambda: len(load.confirmed) >= 200, timeout=60, every=0.05)
        before = len(load.confirmed)
        took, status = box.stop()
    finally:
        load.stop()
    check(
        f"{label}: SIGTERM mid-load stops it by itself within 10 s",
        took < 10 and status == 0,
        f"{took:.1f} s, exit status {status}, {before} confirmed when it was sent, "
        f"{len(load.dispatched)} dispatches and {len(load.confirmed)} confirms acknowledged",
    )
    return took, load


def nothing_acknowledged_lost(check: Checks, box: Box, label: str, load: Load) -> None:
    """After the restart: every acknowledged dispatch is there, every acknowledged confirm is
    confirmed."""
    states: dict[str, str] = {}
    with box.client(box.token("after-restart", "read")) as client:
        for op in sorted(load.dispatched):
            answer = client.get(f"/v1/operations/{op}")
            states[op] = (
                answer.json()["operation"]["state"] if answer.status_code == 200 else "missing"
            )
    lost = [op for op in load.dispatched if states[op] not in ("dispatching", "confirmed")]
    unconfirmed = [op for op in load.confirmed if states[op] != "confirmed"]
    check(
        f"{label}: after the restart nothing acknowledged is lost",
        not lost and not unconfirmed and bool(load.confirmed),
        f"{len(load.dispatched)} dispatches, {len(load.confirmed)} confirms checked; "
        f"lost {lost[:3]}, not confirmed {unconfirmed[:3]}",
    )


def an_older_ledger_is_backed_up_then_migrated(
    check: Checks, box: Box, label: str, older: Path | None = None
) -> None:
    """A ledger of the first schema (``older``, a SQLite file put in the volume; else the
    database ``FLOWLEDGER_DB`` names, on PostgreSQL through the image's pg_dump): the
    entrypoint backs it up into /data/backups, migrates it, and run serves it."""
    box.create()
    if older is not None:
        older.chmod(0o644)  # read by the image's user
        box.put_ledger(older)
    box.start()
    said = box.logs()
    backups = box.engine.exec(box.name, "ls", "/data/backups").split()
    check(
        f"upgrade: an older {label} ledger is backed up into /data/backups, then migrated",
        "backed up schema version 1 to /data/backups/" in said
        and "migrated schema version 1 ->" in said
        and len(backups) == 1,
        ", ".join(line for line in said.splitlines() if "schema version" in line),
    )
    box.stop()


def a_backup_through_exec(check: Checks, box: Box, label: str) -> None:
    """``flowledger backup /data/backups/`` through exec (on PostgreSQL, the image's pg_dump):
    the head it prints is the one ``verify`` finds in the ledger, which stands still here."""
    box.engine.exec(box.name, "mkdir", "-p", "/data/backups")
    said = box.flowledger("backup", "/data/backups/", check=False)
    verified = box.flowledger("verify", check=False)
    head = next(
        (
            line.split(": ", 1)[1]
            for line in said.splitlines()
            if line.startswith(("copy verified: ", "dumped: "))
        ),
        None,
    )
    written = said.rsplit(" written to ", 1)[-1].strip()
    check(
        f"{label}: `flowledger backup /data/backups/` through exec prints the ledger's head",
        head is not None
        and verified.startswith(f"chain ok: {head}")
        and written.startswith("/data/backups/flowledger-"),
        " | ".join(said.splitlines()),
    )


def restart_keeps_the_data(check: Checks, box: Box, label: str) -> float:
    took = box.start()
    tail = box.logs()
    check(
        f"{label}: restarted on its data, the entrypoint creates nothing and migrates nothing",
        "already exists; nothing to do" in tail and "is current; nothing to do" in tail,
    )
    return took


def not_root(check: Checks, box: Box, label: str) -> None:
    status = box.engine.exec(box.name, "cat", "/proc/1/status")
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    command = box.engine.exec(box.name, "cat", "/proc/1/cmdline").replace("\0", " ").strip()
    check(
        f"{label}: its process (PID 1, `flowledger run`) is not root",
        "0" not in uids and "flowledger run" in command,
        f"uids {' '.join(uids)}: {command}",
    )


def healthy(check: Checks, box: Box, label: str) -> None:
    status = box.engine.health_status(box.name)
    check(f"{label}: healthz turns the container healthy", status == "healthy", status)


# What the entrypoint's `init` and `migrate` print before `run` starts: plain lines.
ENTRYPOINT_SAYS = (
    "created ledger at ",
    "ledger at ",
    "schema version ",
    "backed up schema ",
    "migrated schema ",
)


def json_logs(check: Checks, box: Box, label: str) -> None:
    """With FLOWLEDGER_LOG_FORMAT=json, every line ``run`` writes is a JSON object (the lines
    before it are the entrypoint's ``init`` and ``migrate``)."""
    lines = box.logs().splitlines()
    from_run = [line for line in lines if not line.startswith(ENTRYPOINT_SAYS)]
    bad = [line for line in from_run if not _json_object(line)]
    check(
        f"{label}: its log is one JSON object a line from `run` on",
        bool(from_run) and not bad,
        f"{len(from_run)} lines; {bad[:2]}",
    )


def _json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def terminal_ui(check: Checks, box: Box, label: str) -> None:
    """``flowledger tui`` through ``exec -it`` in a terminal tmux draws, then quits on ``q``."""
    if shutil.which("tmux") is None:
        print("      (no tmux: the terminal UI through exec is not checked)")
        return
    session = f"{box.name}-tui"
    command = [*box.engine.command, "exec", "-it", box.name]  # -t sets TERM=xterm
    subprocess.run(
        [
            "tmux",
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            "140",
            "-y",
            "40",
            " ".join([*command, "flowledger", "tui"]),
        ],
        check=True,
    )

    def pane() -> str:
        done = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
        )
        return done.stdout if done.returncode == 0 else ""

    try:
        drawn = wait_for(lambda: "flowledger" in pane() and "Quit" in pane(), timeout=30)
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        gone = wait_for(
            lambda: (
                subprocess.run(
                    ["tmux", "has-session", "-t", session], capture_output=True
                ).returncode
                != 0
            ),
            timeout=15,
        )
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    check(f"{label}: `flowledger tui` through exec -it draws and quits on q", drawn and gone)
