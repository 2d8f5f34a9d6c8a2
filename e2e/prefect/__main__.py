"""The Prefect connector end to end, against a real Prefect 3.9 server (``make e2e-prefect``;
not part of CI).

    python -m e2e.prefect

What it does, printing one line per check:

1. installs Prefect 3.9.x into a venv of its own (``FLOWLEDGER_E2E_PREFECT_VENV``, default
   ``/tmp/flowledger-e2e-prefect-venv``) and starts ``prefect server start`` on SQLite on a
   free loopback port with ``PREFECT_SERVER_API_AUTH_STRING`` set;
2. ``flowledger sources check``: the server with its credentials, with a wrong password
   (401), a closed port (unreachable) and the ledger's own address (not Prefect);
3. runs real flows with Prefect's Python (``e2e/prefect/flows.py``), guarded with the
   ledger's client (``flowledger.client`` from ``clients/python``): guarded writes, failing
   flows, a flow retried after its write (written once, the retry skipped) and one retried
   after a write whose answer was lost (the retry raises the client's ``Held``);
4. ``flowledger sync --once`` and compares every kept copy field by field with the flow run
   as Prefect answers it; the operations link to their runs;
5. walks 600 flow runs 20 at a time while runs are deleted and created between pages: none
   missed, none doubled;
6. deletes flow runs in Prefect, ``sync --once --reconcile``: their copies are gone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import ROOT, free_port, workdir
from e2e.n8n.checks import Checks
from e2e.prefect.server import PASSWORD, USER, PrefectServer, prefect_python
from flowledger.connectors import registry
from flowledger.connectors.base import Settings
from flowledger.connectors.prefect import STATUS

FLOWS = Path(__file__).with_name("flows.py")
CLIENT = ROOT / "clients" / "python"  # flowledger.client alone, for Prefect's venv
SOURCE = "local-prefect"


def source(name: str, url: str, password_env: str = "E2E_PREFECT_PASSWORD") -> str:
    return (
        f'[[sources]]\nname = "{name}"\nkind = "prefect"\nbase_url = "{url}"\n'
        f'username_env = "E2E_PREFECT_USER"\npassword_env = "{password_env}"\n\n'
    )


def sources_check(check: Checks, ledger: LocalLedger) -> None:
    said = ledger.cli("sources", "check", SOURCE)
    check("sources check: the server answers", "Prefect API at" in said, said.strip())
    for name, expect in (
        ("wrong-password", "refused the credentials (401)"),
        ("closed-port", "cannot reach Prefect"),
        ("not-prefect", "not the Prefect API"),
    ):
        said = ledger.cli("sources", "check", name, check=False)
        check(f"sources check: {name}", expect in said, said.strip().splitlines()[-1])


def executions(ledger: LocalLedger, token: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    after = None
    while True:
        params: dict[str, Any] = {"source": SOURCE, "limit": 500}
        if after is not None:
            params["after"] = after
        page = httpx.get(
            f"{ledger.url}/v1/executions",
            params=params,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        ).json()
        found.update({row["external_id"]: row for row in page["items"]})
        after = page["next_after"]
        if after is None:
            return found


def same_time(kept: str | None, told: str | None) -> bool:
    if kept is None or told is None:
        return kept is told
    from datetime import datetime

    def parse(t: str) -> datetime:
        return datetime.fromisoformat(t.replace("Z", "+00:00"))

    return parse(kept) == parse(told)


def compare(check: Checks, prefect: httpx.Client, kept: dict[str, dict[str, Any]]) -> None:
    runs = prefect.post("/flow_runs/filter", json={"limit": 200}).json()
    flows = {f["id"]: f["name"] for f in prefect.post("/flows/filter", json={}).json()}
    wrong: list[str] = []
    for run in runs:
        row = kept.get(run["id"])
        if row is None:
            wrong.append(f"{run['name']}: not kept")
            continue
        expected = {
            "status": STATUS[run["state_type"]],
            "final": run["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"),
            "workflow_id": run["flow_id"],
            "workflow_name": flows[run["flow_id"]],
            "mode": "deployment" if run["deployment_id"] else "flow call",
        }
        for key, value in expected.items():
            if row[key] != value:
                wrong.append(f"{run['name']}.{key}: {row[key]!r} != {value!r}")
        for key, told in (("started_at", "start_time"), ("stopped_at", "end_time")):
            if not same_time(row[key], run[told]):
                wrong.append(f"{run['name']}.{key}: {row[key]} != {run[told]}")
    check(
        f"{len(runs)} flow runs kept field by field (status, final, flow id and name, mode, "
        "start, end)",
        not wrong and len(runs) == len(kept),
        "; ".join(wrong[:5]),
    )


def paging_under_change(check: Checks, server: PrefectServer, prefect: httpx.Client) -> None:
    flow_id = _post(prefect, "/flows/", {"name": "bulk"})["id"]

    def create(n: int) -> list[str]:
        body = {"flow_id": flow_id, "state": {"type": "COMPLETED", "name": "Completed"}}
        return [_post(prefect, "/flow_runs/", body)["id"] for _ in range(n)]

    bulk = create(600)
    before = set(_all_ids(prefect))
    connector = registry.build(
        "prefect",
        httpx.Client(timeout=30),
        Settings(base_url=server.api, username=USER, password=PASSWORD, page_size=20),
    )
    yielded: list[str] = []
    deleted: set[str] = set()
    added: list[str] = []
    ordered = sorted(bulk)  # only these are deleted; the flows' runs are checked later
    for n, page in enumerate(connector.pages(None)):
        yielded.extend(r.external_id for r in page.records)
        # between pages: delete two runs (one read already, one not yet) and add two
        for victim in (ordered[(n * 7) % len(ordered)], ordered[(n * 13 + 5) % len(ordered)]):
            if victim not in deleted:
                _write(prefect, "DELETE", f"/flow_runs/{victim}")
                deleted.add(victim)
        added.extend(create(2))
    counts = Counter(yielded)
    doubled = sum(1 for c in counts.values() if c > 1)
    missed = (before - deleted) - set(yielded)
    check(
        f"paging under change: {len(yielded)} read in pages of 20 while {len(deleted)} were "
        f"deleted and {len(added)} added",
        doubled == 0 and not missed,
        f"{len(missed)} missed, {doubled} doubled",
    )


def _write(prefect: httpx.Client, method: str, path: str, body: Any = None) -> httpx.Response:
    """One write, tried again while Prefect on SQLite answers 503 (a write it could not take
    beside its own background services')."""
    for _ in range(50):
        answer = prefect.request(method, path, json=body)
        if answer.status_code != 503:
            break
        time.sleep(0.2)
    answer.raise_for_status()
    return answer


def _post(prefect: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    return dict(_write(prefect, "POST", path, body).json())


def _all_ids(prefect: httpx.Client) -> list[str]:
    ids: list[str] = []
    while True:
        page = prefect.post("/flow_runs/filter", json={"limit": 200, "offset": len(ids)}).json()
        ids.extend(r["id"] for r in page)
        if len(page) < 200:
            return ids


def run(check: Checks, tmp: Path) -> None:
    python = prefect_python()
    version = subprocess.run(
        [str(python), "-c", "import prefect; print(prefect.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    server = PrefectServer(tmp / "prefect")
    closed = free_port()
    ledger = LocalLedger(tmp / "ledger")
    ledger.folder.mkdir()
    try:
        server.start(python)
        print(f"      Prefect {version} serving on {server.api} (SQLite, auth string set)")
        ledger.sources = (
            source(SOURCE, server.api)
            + source("wrong-password", server.api, "E2E_WRONG_PASSWORD")
            + source("closed-port", f"http://127.0.0.1:{closed}/api")
            + source("not-prefect", f"{ledger.url}/api")
        )
        ledger.env_extra = {
            "E2E_PREFECT_USER": USER,
            "E2E_PREFECT_PASSWORD": PASSWORD,
            "E2E_WRONG_PASSWORD": "not-" + PASSWORD,
        }
        ledger.start()
        sources_check(check, ledger)
        write, read = ledger.token("flows", "write"), ledger.token("reader", "read")
        target = tmp / "target.txt"
        target.touch()
        out = tmp / "made.json"
        env = {
            **server.env(),
            "E2E_LEDGER_URL": ledger.url,
            "E2E_LEDGER_TOKEN": write,
            "E2E_TARGET": str(target),
            "PYTHONPATH": str(CLIENT),
        }
        flows = subprocess.run(
            [str(python), str(FLOWS), str(out)], env=env, capture_output=True, text=True
        )
        if flows.returncode != 0:
            raise RuntimeError(f"the flows did not run: {flows.stderr[-2000:]}")
        made = json.loads(out.read_text())
        writes = Counter(target.read_text().split())
        check(
            "5 guarded invoice flows wrote once each",
            all(writes[f"invoice:INV-{n}:send"] == 1 for n in range(1, 6)),
        )
        check(
            "a flow retried after its write wrote once (the retry was skipped)",
            writes["invoice:INV-R:send"] == 1,
            f"writes {writes['invoice:INV-R:send']}",
        )
        check(
            "a flow retried after a write it never confirmed: the retry raised Held",
            writes["invoice:INV-L:send"] == 1 and made.get("lost_error", "").startswith("Held"),
            made.get("lost_error", ""),
        )
        ledger.cli("sync", "--once", "--source", SOURCE)
        prefect = server.client()
        kept = executions(ledger, read)
        compare(check, prefect, kept)
        retried = prefect.get(f"/flow_runs/{made['retried']}").json()
        check(
            "the retried flow run is one execution, run_count 2, completed",
            retried["run_count"] == 2 and kept[made["retried"]]["status"] == "success",
        )
        check(
            "failing flows kept as error", all(kept[i]["status"] == "error" for i in made["failed"])
        )
        op = ledger.operation(read, "invoice:INV-L:send") or {}
        state = (op.get("operation") or {}).get("state")
        reasons = [h.get("reason") for h in op.get("holds", [])]
        check(
            "the unconfirmed write stays dispatching in the ledger, held as unknown_outcome",
            state == "dispatching" and "unknown_outcome" in reasons,
            f"state {state}, holds {reasons}",
        )
        linked = ledger.operation(read, "invoice:INV-9:send") or {}
        ids = {e.get("external_id") for e in linked.get("executions", [])}
        check("the tagged run is linked to its operation", made["tagged"] in ids, str(ids))
        paging_under_change(check, server, prefect)
        ledger.cli("sync", "--once", "--source", SOURCE)
        victims = made["failed"] + made["invoices"][:2]
        for victim in victims:
            assert _write(prefect, "DELETE", f"/flow_runs/{victim}").status_code == 204
        ledger.cli("sync", "--once", "--reconcile", "--source", SOURCE)
        kept = executions(ledger, read)
        gone = {i for i, row in kept.items() if row["gone_at"]}
        check(
            f"{len(victims)} deleted flow runs marked gone, no other",
            gone == set(victims),
            f"{len(gone)} gone",
        )
    finally:
        ledger.stop()
        server.stop()


def main() -> int:
    started = time.monotonic()
    check = Checks()
    with workdir("flowledger-e2e-prefect-") as tmp, check.ending_early():
        run(check, tmp)
    return check.summary("e2e-prefect", started)


if __name__ == "__main__":
    sys.exit(main())
