"""A workflow step as a separate process: dispatch, write to the target, confirm.

    python -m tests.crash.workflow DB OPERATION_ID EXECUTION_ID INPUT_JSON TARGET_FILE

The "external system" is TARGET_FILE: each write appends one line and fsyncs, so the test can
count how many times the effect really happened. Crash points (``flowledger.plumbing.faults``)
fire inside the services and at the named places below when ``FLOWLEDGER_CRASH_AT`` says so.
Prints the ledger's answers as JSON lines.
"""

from __future__ import annotations

import json
import os
import sys

from flowledger.plumbing.faults import crashpoint
from flowledger.services.ledger import DispatchInput, Ledger
from flowledger.storage.engine import open_store


def write_to_target(path: str, line: str) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    with open(path, encoding="utf-8") as fh:
        return f"T-{sum(1 for _ in fh)}"  # the target's record id


def main(db: str, operation_id: str, execution_id: str, input_json: str, target: str) -> None:
    store = open_store(db)
    ledger = Ledger(store)
    answer = ledger.dispatch(
        operation_id,
        DispatchInput(
            processing_version="v1",
            execution_id=execution_id,
            input=json.loads(input_json),
            has_input=True,
            run_index=0,
        ),
    ).run("token:workflow")
    print(json.dumps({"dispatch": answer.as_dict()}), flush=True)
    crashpoint("after_dispatch_commit")
    if answer.decision == "go":
        receipt = write_to_target(target, f"{operation_id} by {execution_id}")
        crashpoint("after_external_write")
        confirmed = ledger.confirm(operation_id, receipt, execution_id=execution_id).run(
            "token:workflow"
        )
        crashpoint("after_confirm_commit")
        print(json.dumps({"confirm": confirmed.as_dict()}), flush=True)
    store.dispose()


if __name__ == "__main__":
    main(*sys.argv[1:6])
