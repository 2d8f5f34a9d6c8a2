"""What guarding a write costs in a real n8n: executions per second of the same webhook → write
workflow, plain and guarded, in rounds that alternate within one run.

    python -m bench.n8n_guard [--rounds 3] [--executions 400] [--clients 16]

Needs a local n8n (the same install as ``make e2e-n8n``: ``FLOWLEDGER_E2E_N8N`` and, for
Node 22+, ``FLOWLEDGER_E2E_NODE``); without it, says how to install one and exits 0.

One n8n (SQLite) with ``n8n-nodes-flowledger`` installed, one ``flowledger serve`` (SQLite),
a loopback write target, and a stand-in ledger that answers every call at once. The flows,
each a Webhook that answers when its execution ends:

- ``plain``: Webhook → write;
- ``no-ops``: Webhook → No Operation → write → No Operation (n8n's cost of two more nodes);
- ``template`` / ``template*``: the HTTP Request template (settings, dispatch, switch, write,
  confirm) against the ledger / the stand-in;
- ``node`` / ``node*``: the Flowledger node template (guard, write, confirm) against the ledger /
  the stand-in.

Every execution writes a new invoice (a ``go``, a write and a confirm). Printed: the median
executions/s of each flow over the rounds, ``node ÷ plain`` (goal ≥ 0.88), ``template ÷ plain``,
the ledger's own share, ``1 - node ÷ node*`` (goal ≤ 5%), and ``no-ops ÷ plain`` with
``node* ÷ no-ops``: how much of the gap is n8n running two more nodes, and how much the node's
own work.

Beside each rate, the CPU time n8n's processes spent per execution of that flow (from
``/proc``): unlike the rates, it barely moves when other work shares the cores, so ``node*``
minus ``no-ops`` is what the node's two calls cost inside n8n.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import (
    N8n,
    Unavailable,
    find_n8n,
    install_community_package,
    packed_node_package,
    workdir,
)
from e2e.loopback import JsonHandler, Loopback, Target
from flowledger.n8n.setup import TEMPLATES, fill_template, load_template

WRITE = "Write to target (your API)"
WEBHOOK = "Invoice to send"


class StandIn(Loopback):
    """A ledger that answers at once: ``go`` to every dispatch, ``confirmed`` to the rest."""

    def __init__(self) -> None:
        class Handler(JsonHandler):
            def do_POST(self) -> None:
                self.read_body()
                parts = self.path.split("/")
                go = parts[-1] == "dispatch"
                answer = {
                    "operation_id": parts[3] if len(parts) > 3 else "",
                    "decision": "go" if go else None,
                    "state": "dispatching" if go else "confirmed",
                    "attempt": 1,
                    "reason": None,
                    "receipt": None,
                }
                self.send_json(200, answer)

        super().__init__(Handler)


def for_bench(workflow: dict[str, Any], name: str, path: str, target_url: str) -> dict[str, Any]:
    workflow = {**workflow, "name": name, "settings": {"executionOrder": "v1"}}
    for node in workflow["nodes"]:
        if node["name"] == WEBHOOK:
            node["parameters"].update(path=path, responseMode="lastNode")
            node["webhookId"] = path
        if node["name"] == WRITE:
            node["parameters"]["url"] = target_url
    return workflow


def plain(path: str, target_url: str) -> dict[str, Any]:
    return {
        "name": "bench: plain write",
        "nodes": [
            {
                "parameters": {"httpMethod": "POST", "path": path, "responseMode": "lastNode"},
                "id": "bench-plain-1",
                "name": WEBHOOK,
                "type": "n8n-nodes-base.webhook",
                "typeVersion": 2,
                "position": [0, 0],
                "webhookId": path,
            },
            {
                "parameters": {
                    "method": "POST",
                    "url": target_url,
                    "sendBody": True,
                    "specifyBody": "json",
                    "jsonBody": "={{ JSON.stringify($json.body) }}",
                    "options": {"timeout": 10000},
                },
                "id": "bench-plain-2",
                "name": WRITE,
                "type": "n8n-nodes-base.httpRequest",
                "typeVersion": 4.2,
                "position": [200, 0],
            },
        ],
        "connections": {WEBHOOK: {"main": [[{"node": WRITE, "type": "main", "index": 0}]]}},
        "settings": {"executionOrder": "v1"},
    }


def with_no_ops(path: str, target_url: str) -> dict[str, Any]:
    """``plain`` with a No Operation node before and after the write: what two more nodes cost
    in n8n itself, without a call, the floor under ``node*``."""
    workflow = plain(path, target_url)
    workflow["name"] = "bench: plain write between two no-ops"
    before, after = "Before (no-op)", "After (no-op)"
    for n, name in enumerate((before, after)):
        workflow["nodes"].append(
            {
                "parameters": {},
                "id": f"bench-noop-{n}",
                "name": name,
                "type": "n8n-nodes-base.noOp",
                "typeVersion": 1,
                "position": [400 * n + 100, 200],
            }
        )
    workflow["connections"] = {
        WEBHOOK: {"main": [[{"node": before, "type": "main", "index": 0}]]},
        before: {"main": [[{"node": WRITE, "type": "main", "index": 0}]]},
        WRITE: {"main": [[{"node": after, "type": "main", "index": 0}]]},
    }
    return workflow


def fire(url: str, count: int, clients: int, label: str) -> tuple[float, int]:
    """``count`` executions from ``clients`` threads; executions/s and how many failed."""
    lock = threading.Lock()
    next_n = [0]
    failures = [0]

    def client() -> None:
        with httpx.Client(timeout=60) as http:
            while True:
                with lock:
                    if next_n[0] >= count:
                        return
                    next_n[0] += 1
                    n = next_n[0]
                body = {"invoice_id": f"{label}-{n}-{time.monotonic_ns()}", "amount": n}
                try:
                    ok = http.post(url, json=body).status_code == 200
                except httpx.HTTPError:
                    ok = False
                if not ok:
                    with lock:
                        failures[0] += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return count / (time.perf_counter() - started), failures[0]


def cpu_seconds(pgid: int) -> float:
    """User and system CPU time of the live processes in process group ``pgid`` (n8n and its
    task runners), from ``/proc``."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone since the listing
            continue
        if int(fields[2]) == pgid:  # pgrp; fields[11:13] are utime and stime
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def main() -> int:
    # A SIGTERM (from `timeout`, a supervisor) unwinds through the ``finally`` blocks, which
    # stop n8n and the ledger: they run in sessions of their own and would outlive us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--executions", type=int, default=400)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    try:
        home, node_dir = find_n8n()
    except Unavailable as exc:
        print(f"bench.n8n_guard SKIPPED: {exc}")
        return 0
    with workdir("flowledger-bench-n8n-") as tmp:
        return run(tmp, home, node_dir, args)


def run(tmp: Path, home: Path, node_dir: Path | None, args: argparse.Namespace) -> int:
    n8n = N8n(home, node_dir, tmp / "n8n")
    install_community_package(n8n.user_folder, packed_node_package(tmp))
    ledger = LocalLedger(tmp / "ledger")
    ledger.folder.mkdir()
    target, stand_in = Target(), StandIn()
    try:
        n8n.start()
        n8n.make_owner_and_key()
        ledger.start()
        flows = make_flows(n8n, ledger, target, stand_in)
        urls = {name: f"{n8n.url}/webhook/{path}" for name, path in flows.items()}
        time.sleep(2)
        for name, url in urls.items():  # warm up each flow, and check it answers
            rate, failed = fire(url, 20, 4, f"warm-{name}")
            if failed:
                print(f"flow {name} failed {failed} of 20 warm-up executions", file=sys.stderr)
                return 1
        rates: dict[str, list[float]] = {name: [] for name in urls}
        cpu: dict[str, list[float]] = {name: [] for name in urls}
        assert n8n.proc is not None  # started above, in a session (and group) of its own
        print(
            f"{args.rounds} rounds x {args.executions} executions per flow, {args.clients} "
            f"clients; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        for r in range(args.rounds):
            order = list(urls) if r % 2 == 0 else list(reversed(urls))
            for name in order:
                before = cpu_seconds(n8n.proc.pid)
                rate, failed = fire(urls[name], args.executions, args.clients, f"r{r}-{name}")
                ms = (cpu_seconds(n8n.proc.pid) - before) * 1000 / args.executions
                rates[name].append(rate)
                cpu[name].append(ms)
                note = f" ({failed} failed)" if failed else ""
                print(
                    f"  round {r + 1}  {name:<10} {rate:6.1f} executions/s  "
                    f"n8n CPU {ms:5.1f} ms/execution{note}",
                    flush=True,
                )
        report(rates, cpu)
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        n8n.stop()
        ledger.stop()
        target.close()
        stand_in.close()
    return 0


def make_flows(n8n: N8n, ledger: LocalLedger, target: Target, stand_in: StandIn) -> dict[str, str]:
    """Create and activate the flows; name → webhook path."""
    token = ledger.token("bench", "write")

    def credential(kind: str, name: str, data: dict[str, Any]) -> dict[str, str]:
        made = n8n.api("POST", "/credentials", json={"name": name, "type": kind, "data": data})
        return {"credential_id": made["id"], "credential_name": name}

    header = {"name": "Authorization", "value": f"Bearer {token}"}
    node_data: Callable[[str], dict[str, Any]] = lambda url: {  # noqa: E731
        "baseUrl": url,
        "token": token,
        "signingSecret": "",
        "source": "bench",
    }
    _, http_template = load_template(TEMPLATES, False, "example")
    _, node_template = load_template(TEMPLATES, True, "example")
    made: dict[str, dict[str, Any]] = {
        "plain": plain("bench-plain", target.url),
        "no-ops": with_no_ops("bench-no-ops", target.url),
    }
    for star, url in (("", ledger.url), ("*", stand_in.url)):
        hdr = credential("httpHeaderAuth", f"bench header{star}", header)
        fl = credential("flowledgerApi", f"bench node{star}", node_data(url))
        tag = "ledger" if not star else "stand-in"
        made[f"template{star}"] = for_bench(
            fill_template(
                http_template, **hdr, ledger_url=url, source="bench", error_workflow_id=None
            ),
            f"bench: template ({tag})",
            f"bench-template-{tag}",
            target.url,
        )
        made[f"node{star}"] = for_bench(
            fill_template(
                node_template, **fl, ledger_url=url, source="bench", error_workflow_id=None
            ),
            f"bench: node ({tag})",
            f"bench-node-{tag}",
            target.url,
        )
    paths = {}
    for name, workflow in made.items():
        n8n.create_workflow(workflow, activate=True)
        webhook = next(n for n in workflow["nodes"] if n["name"] == WEBHOOK)
        paths[name] = webhook["parameters"]["path"]
    return paths


def report(rates: dict[str, list[float]], cpu: dict[str, list[float]]) -> None:
    median = {name: statistics.median(values) for name, values in rates.items()}
    print("\nmedian executions/s: " + ", ".join(f"{n} {v:.1f}" for n, v in median.items()))
    ms = {name: statistics.median(values) for name, values in cpu.items()}
    print("median n8n CPU ms/execution: " + ", ".join(f"{n} {v:.1f}" for n, v in ms.items()))
    print(
        f"n8n CPU of the node's two calls (node* - no-ops) = {ms['node*'] - ms['no-ops']:.1f} ms, "
        f"of two no-op nodes (no-ops - plain) = {ms['no-ops'] - ms['plain']:.1f} ms, "
        f"of the write itself (plain) = {ms['plain']:.1f} ms"
    )
    node, plain_rate = median["node"], median["plain"]
    print(f"node guard / plain      = {node / plain_rate:.3f}  (goal >= 0.88)")
    print(f"template guard / plain  = {median['template'] / plain_rate:.3f}")
    print(f"node* (stand-in) / plain = {median['node*'] / plain_rate:.3f}  (n8n's own cost)")
    print(
        f"no-ops / plain          = {median['no-ops'] / plain_rate:.3f}  "
        "(two more nodes that do nothing: n8n's floor under node*)"
    )
    own = median["node*"] / median["no-ops"]
    print(f"node* / no-ops          = {own:.3f}  (the node's own work, calls included)")
    print(f"template* / plain       = {median['template*'] / plain_rate:.3f}")
    share = 1 - node / median["node*"]
    print(f"ledger's own share (1 - node / node*) = {share:.1%}  (goal <= 5%)")
    t_share = 1 - median["template"] / median["template*"]
    print(f"ledger's share behind the template (1 - template / template*) = {t_share:.1%}")


if __name__ == "__main__":
    sys.exit(main())
