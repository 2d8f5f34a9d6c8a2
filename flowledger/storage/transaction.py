"""The transaction the unit of work hands to a work: the driver's :class:`~flowledger.storage.tx.Tx`
with each repository's statements as its methods.

It implements the services' port (:class:`flowledger.services.port.Tx`). The repositories'
functions take the transaction first and are the methods themselves, not wrappers:
``tx.save_operation(row, op)`` costs what ``operations.save_operation(tx, row, op)`` costs.
"""

from __future__ import annotations

from flowledger.storage import acting, holds, idempotency, operations
from flowledger.storage.tx import Tx


class SqlTx(Tx):
    """One write transaction on the database, with the statements a work asks for by name."""

    # operations, attempts and receipts
    load_operation = operations.load_operation
    load_with_holds = operations.load_with_holds
    lock_operations = operations.lock_operations
    read_again = operations.read_again
    dispatching_for_execution = operations.dispatching_for_execution
    save_operation = operations.save_operation
    mark_dispatch = operations.mark_dispatch
    insert_attempt = operations.insert_attempt
    end_attempt = operations.end_attempt
    unsent_attempts = operations.unsent_attempts
    insert_receipt = operations.insert_receipt
    forget_answer = idempotency.forget_answer
    # holds and their alerts
    holds_of = holds.holds_of
    insert_new_holds = holds.insert_new_holds
    load_hold = holds.load_hold
    open_overdue_about = holds.open_overdue_about
    close_hold = holds.close_hold
    change_hold = holds.change_hold
    add_hold_evidence = holds.add_hold_evidence
    count_cause = holds.count_cause
    insert_alerts = holds.insert_alerts
    # what the ledger does in the workflow tool
    insert_pins = acting.insert_pins
    ask_retry = acting.ask_retry
