"""What a witness costs: ``flowledger checkpoint``'s work with one witness on a real socket, and
the witness's own share of it.

``python -m bench.witness [--rounds N] [--grow K]``: a fresh SQLite ledger; ``--rounds`` times,
``K`` operations are written (a dispatch each) and one checkpoint is sent to a witness served
by uvicorn on loopback (:func:`flowledger.programs.witness.create_witness_app`, its state a
SQLite file): signed, kept, posted with the consistency proof from the size the witness last
cosigned, its answer verified and kept. Wall time per checkpoint (p50, p99), and the CPU time
(``time.process_time``, both sides being in this process) per checkpoint, of which the
witness's request handling (timed by a wrapper around its state's compare-and-swap).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flowledger.config import WitnessConfig
from flowledger.domain.cosignatures import Cosigner
from flowledger.programs.witness import create_witness_app
from flowledger.scheduled.witnesses import Witnesses
from flowledger.services.ledger import DispatchInput, Ledger
from flowledger.services.signing import create_key
from flowledger.storage.migrate import init_ledger
from flowledger.storage.reads import tree_proofs as proofs
from flowledger.storage.witness_state import WitnessState


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.witness")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--grow", type=int, default=10, help="operations between checkpoints")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        where = Path(folder)
        store, _ = init_ledger(str(where / "ledger.db"))
        ledger = Ledger(store)
        signer = create_key(where / "log.key", proofs.ledger_origin(store))
        cosigner = Cosigner("witness.example/bench", Ed25519PrivateKey.generate())
        state = WitnessState(where / "witness.db")
        spent = [0.0]
        real = state.advance

        def timed(origin: str, decide: Any) -> str:
            start = time.process_time()
            try:
                return real(origin, decide)
            finally:
                spent[0] += time.process_time() - start

        state.advance = timed  # type: ignore[method-assign]
        app = create_witness_app(state, cosigner, [signer.verifier])
        walls: list[float] = []
        with served(app) as url:
            config = WitnessConfig(url=url, vkey=cosigner.verifier.text())
            sender = Witnesses(store, signer, [config])
            n = 0
            cpu = 0.0
            for _ in range(args.rounds):
                for _ in range(args.grow):
                    n += 1
                    ledger.dispatch(f"op-{n}", _req(n)).run("bench")
                start, start_cpu = time.perf_counter(), time.process_time()
                done = sender.checkpoint()
                walls.append(time.perf_counter() - start)
                cpu += time.process_time() - start_cpu
                assert done.cosigned == 1, done.answers
            sender.close()
        store.dispose()
    walls.sort()
    p99 = walls[min(len(walls) - 1, int(len(walls) * 0.99))]
    print(f"{args.rounds} checkpoints, {args.grow} operations between them, {n} in all")
    print(
        f"wall per checkpoint: p50 {statistics.median(walls) * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms"
    )
    print(f"CPU per checkpoint (ledger and witness): {cpu / args.rounds * 1e3:.2f} ms")
    witness = spent[0] / args.rounds * 1e3
    print(f"of which the witness's check, cosignature and store: {witness:.2f} ms")


def _req(n: int) -> DispatchInput:
    return DispatchInput(
        processing_version="v1",
        execution_id=f"exec-{n}",
        input={"n": n},
        has_input=True,
        workflow_id="wf",
        step="send",
        run_index=0,
    )


if __name__ == "__main__":
    main()
