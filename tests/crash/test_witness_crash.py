"""A witness killed while it cosigns: before its transaction commits it holds what it held
(the next request is cosigned from there); after it commits but before it answers, the ledger
has no cosignature, and the next request is told the size the witness holds (409), sent again
from it, and cosigned. Either way nothing is rolled back or cosigned twice at two roots."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from flowledger.config import WitnessConfig
from flowledger.domain.checkpoints import Signer, unverified_checkpoint
from flowledger.domain.cosignatures import cosignatures
from flowledger.scheduled.witnesses import Witnessed, Witnesses
from flowledger.services.ledger import Ledger
from flowledger.services.signing import create_cosigner, create_key
from flowledger.storage.engine import Store
from flowledger.storage.reads import tree_proofs as proofs
from flowledger.storage.witness_state import WitnessState
from tests.support.builders import req
from tests.support.processes import wait_for_signal
from tests.support.receiver import free_port, stop, wait_until_serving

pytestmark = pytest.mark.crash


def serve(tmp_path: Path, log: Signer, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "flowledger.cli", "witness", "serve"]
    command += ["--key", str(tmp_path / "w.key"), "--log", log.verifier.text()]
    command += ["--state", str(tmp_path / "state.db"), "--port", str(port)]
    with (tmp_path / f"witness-{port}.log").open("wb") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(url, proc)
    return proc, url


def send(store: Store, signer: Signer, url: str, vkey: str) -> Witnessed:
    sender = Witnesses(store, signer, [WitnessConfig(url=url, vkey=vkey)])
    try:
        return sender.checkpoint()
    finally:
        sender.close()


@pytest.mark.parametrize("point", ["witness_before_commit", "witness_after_commit"])
def test_a_witness_killed_while_it_cosigns_cosigns_the_next_request(
    store: Store, tmp_path: Path, point: str
) -> None:
    Ledger(store).dispatch("op-1", req()).run("wf")
    signer = create_key(tmp_path / "log.key", proofs.ledger_origin(store))
    cosigner = create_cosigner(tmp_path / "w.key", "witness.example/w1")
    vkey = cosigner.verifier.text()
    signal = tmp_path / "crashed"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLEDGER_CRASH")}
    crashing = {**env, "FLOWLEDGER_CRASH_AT": point, "FLOWLEDGER_CRASH_SIGNAL": str(signal)}
    proc, url = serve(tmp_path, signer, crashing)
    answers: list[Witnessed] = []
    try:
        sending = threading.Thread(target=lambda: answers.append(send(store, signer, url, vkey)))
        sending.start()
        assert wait_for_signal(signal, proc) == point
        proc.kill()
        proc.wait()
        sending.join()
    finally:
        stop(proc)
    [lost] = answers[0].answers
    assert lost.outcome == "failed" and lost.detail.startswith("not reached: ")
    held = WitnessState(tmp_path / "state.db").latest(signer.name)
    size = unverified_checkpoint(answers[0].note).size
    if point == "witness_before_commit":
        assert held is None
    else:
        assert held is not None and unverified_checkpoint(held).size == size
    Ledger(store).dispatch("op-2", req("exec-2")).run("wf")
    proc, url = serve(tmp_path, signer, env)
    try:
        done = send(store, signer, url, vkey)
    finally:
        stop(proc)
    assert [a.outcome for a in done.answers] == ["cosigned"], done.answers
    assert cosignatures(done.note, [cosigner.verifier])
    held = WitnessState(tmp_path / "state.db").latest(signer.name)
    assert held is not None and unverified_checkpoint(held).size == done.size == size + 1
