"""A made-up shift of sample data, so that a newcomer can try the terminal UI in a minute.

Everything goes through the services (dispatch, confirm, fail, holds, a person's decisions),
except the kept executions and the sources, whose sync service writes them elsewhere: those rows
are inserted as a sync would leave them. The ledger is marked as a demo in ``ledger_meta`` and
every operation id starts with ``demo:``; :func:`build_demo` refuses any other ledger.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from flowledger import domain
from flowledger.domain import FailOutcome, Reason
from flowledger.domain.causes import new_hold
from flowledger.domain.versions import Stale
from flowledger.services.ledger import DispatchInput, Ledger
from flowledger.storage import executions, sources
from flowledger.storage import meta as ledger_meta
from flowledger.storage.engine import LedgerError, Store
from flowledger.storage.reads import operation_pages as operations
from flowledger.storage.reads import records
from flowledger.storage.reads.chain import chain_head
from flowledger.storage.reads.hold_queue import HoldFilter, count_open, hold, hold_queue

WORKFLOW = "workflow:prod-n8n"
BASE_URL = "https://n8n.example.com"
WORKFLOWS = {
    "wf-invoices": "Send invoices",
    "wf-payouts": "Partner payouts",
    "wf-crm": "CRM contact sync",
}


class _ShiftClock:
    """Time that moves forward a little with every step of the script."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def at(self, when: datetime) -> None:
        self.now = when


def mark_demo(store: Store) -> None:
    ledger_meta.mark_demo(store)


def built_already(store: Store, where: str) -> bool:
    """Whether the demo ledger ``store`` holds its shift already. Demo data goes only into a
    ledger marked as a demo: any other is refused."""
    if not records.is_demo(store):
        raise LedgerError(
            f"{where} is not a demo ledger; demo data is written only into a new file "
            "(give another --db)"
        )
    return bool(chain_head(store)[0])


class _Script:
    def __init__(self, store: Store, now: datetime) -> None:
        self.store = store
        self.end = now
        self.clock = _ShiftClock(now - timedelta(hours=30))
        self.ledger = Ledger(store, clock=self.clock)
        self.tight = Ledger(store, clock=self.clock, max_attempts=2)
        self.executions: dict[str, dict[str, Any]] = {}

    def ago(self, hours: float = 0, minutes: float = 0) -> datetime:
        when = self.end - timedelta(hours=hours, minutes=minutes)
        self.clock.at(when)
        return when

    def execution(self, ext: str, workflow: str, status: str, started: datetime, **kw: Any) -> None:
        final = status not in ("running", "waiting", "new")
        self.executions[ext] = {
            "source": "prod-n8n",
            "external_id": ext,
            "workflow_id": workflow,
            "workflow_name": WORKFLOWS[workflow],
            "status": status,
            "mode": "trigger",
            "final": final,
            "started_at": started,
            "stopped_at": started + timedelta(seconds=42) if final else None,
            "first_seen_at": started + timedelta(minutes=1),
            "last_seen_at": self.end - timedelta(minutes=3),
            "gone_at": None,
            "retry_of": None,
            **kw,
        }

    def dispatch(
        self, op_id: str, ext: str, workflow: str, payload: dict[str, Any], **kw: Any
    ) -> str:
        ledger = kw.pop("ledger", self.ledger)
        answer = ledger.dispatch(
            op_id,
            DispatchInput(
                processing_version=kw.pop("version", "v3"),
                execution_id=ext,
                input=payload,
                has_input=True,
                run_index=0,
                workflow_id=workflow,
                step=kw.pop("step", "write to the target"),
                source="prod-n8n",
                **kw,
            ),
        ).run(WORKFLOW)
        return answer.decision or ""

    def run(self) -> None:
        """The shift, in the order it happened (events are appended in time order)."""
        self._yesterday()
        self._morning()
        self._unknown_outcomes()
        self._mismatches()
        self._afternoon()
        self._sweep()
        self._rows()

    def _yesterday(self) -> None:
        """Invoices sent and confirmed; their executions are pruned by now."""
        ld = self.ledger
        for n in range(1, 9):
            start = self.ago(hours=31 - n)
            ext = f"{7100 + n}"
            op = f"demo:invoice:INV-{1040 + n}:send"
            self.dispatch(op, ext, "wf-invoices", {"invoice": f"INV-{1040 + n}", "amount": 90 * n})
            ld.confirm(op, f"msg-{5500 + n}@mail.example.com", execution_id=ext).run(WORKFLOW)
            self.execution(
                ext, "wf-invoices", "success", start, gone_at=self.end - timedelta(hours=2)
            )
        self.ago(hours=22)
        ld.prepare(
            "demo:payout:P-2201:transfer",
            processing_version="v3",
            input={"payout": "P-2201", "amount": 12500},
            has_input=True,
            workflow_id="wf-payouts",
            source="prod-n8n",
        ).run(WORKFLOW)

    def _morning(self) -> None:
        ld = self.ledger
        for n in range(1, 7):
            start = self.ago(hours=8, minutes=-15 * n)
            ext = f"{7300 + n}"
            op = f"demo:crm:contact-{300 + n}:upsert"
            self.dispatch(op, ext, "wf-crm", {"contact": 300 + n})
            ld.confirm(op, f"crm-{88000 + n}", execution_id=ext).run(WORKFLOW)
            self.execution(ext, "wf-crm", "success", start)
        self.ago(hours=6, minutes=20)
        self.dispatch("demo:payout:P-2210:transfer", "7401", "wf-payouts", {"payout": "P-2210"})
        ld.fail(
            "demo:payout:P-2210:transfer",
            FailOutcome.REJECTED,
            "422 account closed",
            execution_id="7401",
        ).run(WORKFLOW)
        self.execution("7401", "wf-payouts", "error", self.clock.now)
        self.ago(hours=6)
        ld.prepare(
            "demo:payout:P-2215:transfer",
            processing_version="v3",
            input={"payout": "P-2215"},
            has_input=True,
            workflow_id="wf-payouts",
        ).run(WORKFLOW)

    def _unknown(self, op: str, ext: str, workflow: str, hours: float, error: str) -> int:
        start = self.ago(hours=hours)
        self.dispatch(op, ext, workflow, {"ref": op})
        self.ago(hours=hours, minutes=-2)
        answer = self.ledger.fail(op, FailOutcome.UNKNOWN, error, execution_id=ext).run(WORKFLOW)
        self.execution(ext, workflow, "error", start)
        return answer.hold_ids[0]

    def _unknown_outcomes(self) -> None:
        """Writes whose outcome nobody could tell, and what people decided about some."""
        ld = self.ledger
        to_confirm = self._unknown(
            "demo:invoice:INV-1090:send", "7414", "wf-invoices", 5, "read timeout"
        )
        to_release = self._unknown(
            "demo:payout:P-2205:transfer", "7415", "wf-payouts", 4.9, "socket hang up"
        )
        to_cancel = self._unknown(
            "demo:payout:P-2206:transfer", "7416", "wf-payouts", 4.5, "timeout after 30 s"
        )
        # A second, different receipt for a confirmed invoice: a possible duplicate.
        self.ago(hours=4)
        op = "demo:invoice:INV-1095:send"
        self.dispatch(op, "7430", "wf-invoices", {"invoice": "INV-1095"})
        ld.confirm(op, "msg-6001@mail.example.com", execution_id="7430").run(WORKFLOW)
        self.execution("7430", "wf-invoices", "success", self.clock.now)
        self.ago(hours=3, minutes=50)
        ld.resolve(
            to_confirm,
            "confirm",
            receipt="msg-5990@mail.example.com",
            note="found the message in the mail provider's sent log",
            operator="alice",
        ).run()
        self.ago(hours=3, minutes=40)
        ld.confirm(op, "msg-6017@mail.example.com", execution_id="7431").run(WORKFLOW)
        self.execution("7431", "wf-invoices", "success", self.clock.now, retry_of="7430")
        self.ago(hours=3, minutes=30)
        ld.resolve(
            to_release, "release", note="bank portal shows no transfer for P-2205", operator="bob"
        ).run()
        op = "demo:payout:P-2205:transfer"
        self.dispatch(op, "7417", "wf-payouts", {"ref": op})
        ld.confirm(op, "bank-tx-99120", execution_id="7417").run(WORKFLOW)
        self.execution("7417", "wf-payouts", "success", self.clock.now)
        self.ago(hours=3, minutes=20)
        ld.resolve(
            to_cancel, "cancel", note="partner asked to stop this payout", operator="bob"
        ).run()

    def _mismatches(self) -> None:
        """Dispatches that did not match what the ledger records."""
        self.ago(hours=3, minutes=10)
        self.dispatch("demo:crm:contact-301:upsert", "7440", "wf-crm", {"contact": 999})
        self.execution("7440", "wf-crm", "success", self.clock.now)
        self.overdue_hold = self._unknown(
            "demo:payout:P-2202:transfer", "7411", "wf-payouts", 3, "timeout after 30 s"
        )
        self.ago(hours=2, minutes=50)
        self.dispatch(
            "demo:crm:contact-302:upsert", "7441", "wf-crm", {"contact": 302}, version="v4"
        )
        self.execution("7441", "wf-crm", "success", self.clock.now)
        self.ago(hours=2, minutes=20)
        expired = domain.Approval("v3", self.end - timedelta(hours=6))
        self.dispatch(
            "demo:payout:P-2220:transfer", "7442", "wf-payouts", {"p": 2220}, approval=expired
        )
        self.dispatch(
            "demo:payout:P-2221:transfer",
            "7443",
            "wf-payouts",
            {"p": 2221},
            approval=domain.Approval("v2"),
        )
        for ext in ("7442", "7443"):
            self.execution(ext, "wf-payouts", "success", self.clock.now)
        # Rejected until the attempts ran out.
        op = "demo:payout:P-2230:transfer"
        for n, ext in enumerate(("7450", "7451"), start=1):
            self.ago(hours=2, minutes=10 - 3 * n)
            self.dispatch(op, ext, "wf-payouts", {"p": 2230}, ledger=self.tight)
            self.tight.fail(op, FailOutcome.REJECTED, "503 bank offline").run(WORKFLOW)
            self.execution(ext, "wf-payouts", "error", self.clock.now)
        self.ago(hours=2, minutes=2)
        self.dispatch(op, "7452", "wf-payouts", {"p": 2230}, ledger=self.tight)
        self.execution("7452", "wf-payouts", "success", self.clock.now)

    def _afternoon(self) -> None:
        ld = self.ledger
        assigned = self._unknown(
            "demo:invoice:INV-1101:send", "7412", "wf-invoices", 2, "connection reset by peer"
        )
        self.ago(hours=1, minutes=30)
        ld.update_hold(
            assigned,
            operator="alice",
            owner="carol",
            note="carol has access to the mail provider",
            next_action="check the sent log for INV-1101, then confirm or release",
        ).run()
        # The execution crashed while its write was in flight.
        start = self.ago(hours=1, minutes=20)
        op = "demo:crm:contact-377:upsert"
        self.dispatch(op, "7420", "wf-crm", {"contact": 377})
        self.execution("7420", "wf-crm", "crashed", start)
        # The contact was triggered twice: the second execution asks while 7420 is writing and
        # is turned away (in_flight), which opens no hold about the operation; the operation's
        # screen lists it, and the twin trigger is a duplicate_trigger hold about wf-crm.
        answer = self.dispatch(op, "7421", "wf-crm", {"contact": 377})
        assert answer == "hold", answer
        self.execution("7421", "wf-crm", "error", start)  # a hold stops it with an error
        state = domain.Operation(op, domain.State.DISPATCHING, "", "v3", attempt=1)
        ld.open_hold(
            domain.execution_failed_hold(state, "7420", "execution 7420 crashed while dispatching"),
            operation_id=op,
            execution_id="7420",
        ).run("sweep")

    def _sweep(self) -> None:
        """What the sweep finds, and the last notes of the shift."""
        ld = self.ledger
        self.ago(hours=1)
        ld.open_hold(
            new_hold(
                Reason.STALE_PREPARED,
                "prepared 22 h ago and never dispatched",
                operation_id="demo:payout:P-2201:transfer",
                attempt=0,
            ),
            operation_id="demo:payout:P-2201:transfer",
        ).run("sweep")
        self.execution("7460", "wf-crm", "running", self.end - timedelta(hours=3, minutes=5))
        ld.open_hold(
            new_hold(
                Reason.EXECUTION_STUCK, "running for 2 h", source="prod-n8n", execution_id="7460"
            ),
            execution_id="7460",
            source="prod-n8n",
        ).run("sweep")
        ld.open_hold(
            new_hold(
                Reason.SOURCE_STALE,
                "staging-n8n has not synced for 6 intervals",
                source="staging-n8n",
                since="never",
            ),
            source="staging-n8n",
        ).run("sweep")
        old = Stale("prod-n8n", "wf-invoices", "7430", "demo:invoice:INV-1095:send", "57db", "f61f")
        ld.open_hold(old.hold(), execution_id="7430", source="prod-n8n").run("sync:prod-n8n")
        self.ago(minutes=50)
        late = hold(ld.store, self.overdue_hold)
        assert late is not None
        ld.open_hold(
            new_hold(
                Reason.OVERDUE,
                f"hold {self.overdue_hold} passed its deadline",
                hold_id=self.overdue_hold,
                deadline=late["deadline"],
            ),
            operation_id="demo:payout:P-2202:transfer",
        ).run("sweep")
        self.ago(minutes=40)
        ld.update_hold(
            self.overdue_hold,
            operator="alice",
            note="bank support ticket #4471 opened",
            next_action="wait for the bank's answer on ticket #4471",
        ).run()
        self._unknown("demo:invoice:INV-1102:send", "7413", "wf-invoices", 0.5, "502 Bad Gateway")
        self.ago(minutes=25)
        mismatch = hold_queue(
            self.store, self.end, flt=HoldFilter(fields=(("reason", "version_mis"),))
        )[0]["id"]
        ld.resolve(
            mismatch, "dismiss", note="v4 rollout is expected; v3 record kept", operator="alice"
        ).run()

    def _rows(self) -> None:
        """The kept executions and the sources, as a sync would have left them."""
        with self.store.engine.begin() as conn:
            executions.insert_rows(conn, list(self.executions.values()))
            sources.insert_rows(
                conn,
                [
                    {
                        "name": "prod-n8n",
                        "kind": "n8n",
                        "base_url": BASE_URL,
                        "last_sync_at": self.end - timedelta(minutes=3),
                        "last_success_at": self.end - timedelta(minutes=3),
                        "last_error": None,
                        "last_error_at": None,
                        "status": "ok",
                    },
                    {
                        "name": "staging-n8n",
                        "kind": "n8n",
                        "base_url": "https://staging-n8n.example.com",
                        "last_sync_at": self.end - timedelta(minutes=4),
                        "last_success_at": self.end - timedelta(hours=6),
                        "last_error": "401 Unauthorized: the API key was rejected",
                        "last_error_at": self.end - timedelta(minutes=4),
                        "status": "error",
                    },
                ],
            )


def build_demo(store: Store, where: str, *, now: datetime | None = None) -> None:
    """Fill a fresh demo ledger with a shift ending at ``now``."""
    if built_already(store, where):
        raise LedgerError(
            f"{where} already holds demo data; open it with `flowledger tui --db {where}`, "
            f"or build it again with `flowledger demo --fresh --db {where}`"
        )
    _Script(store, (now or datetime.now(UTC)).astimezone(UTC)).run()


def demo_counts(store: Store) -> dict[str, int]:
    with store.reader.connect() as conn:
        ops = operations.count(conn)
        held = count_open(conn)
    return {"operations": ops, "open_holds": held}
