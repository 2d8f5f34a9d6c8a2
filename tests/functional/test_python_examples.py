"""The Python examples (``examples/python``) send an invoice once against a real receiver on a
loopback socket: the plain script as it is, and the Airflow and Prefect tasks' own code with
the frameworks stood in for by stubs that give the task its run's context (the suite installs
neither framework; ``make e2e-prefect`` runs the Prefect flow on a real Prefect server). What
the stubs cannot show is the frameworks' own behaviour: scheduling, retries, templating."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowledger.client import Held, LedgerError
from flowledger.receiver.app import create_app
from flowledger.services.ledger import Ledger
from tests.support.receiver import SECRET, make_token, receiver_config, server_thread

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"


@pytest.fixture
def served(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A receiver on a loopback port, named to the examples by the environment."""
    token = make_token(ledger, "examples")
    app = create_app(ledger, config=receiver_config(), secret=SECRET, token_ttl=0.0)
    with server_thread(app) as url:
        monkeypatch.setenv("FLOWLEDGER_URL", url)
        monkeypatch.setenv("FLOWLEDGER_TOKEN", token)
        monkeypatch.syspath_prepend(str(EXAMPLES))
        yield url
    for name in ("invoices", "script", "airflow_dag", "prefect_flow"):
        sys.modules.pop(name, None)


@dataclass
class Provider:
    """The invoice API: records what it sent, answers a message id."""

    sent: list[dict[str, Any]]

    def __call__(self, invoice: dict[str, Any]) -> str:
        self.sent.append(invoice)
        return f"msg-{len(self.sent)}"


@pytest.fixture
def provider(served: str, monkeypatch: pytest.MonkeyPatch) -> Provider:
    made = Provider([])
    invoices = importlib.import_module("invoices")
    monkeypatch.setattr(invoices, "post_invoice", made)
    return made


def test_the_script_sends_an_invoice_once_across_runs(
    provider: Provider, capsys: pytest.CaptureFixture[str]
) -> None:
    script = importlib.import_module("script")
    assert script.main(["INV-42", "1200", "--run", "2026-12-06"], send=provider) == 0
    assert script.main(["INV-42", "1200", "--run", "2026-12-07"], send=provider) == 0
    assert capsys.readouterr().out.split() == ["msg-1", "msg-1"]
    assert script.main(["INV-42", "1300", "--run", "2026-12-08"], send=provider) == 3
    assert "input_mismatch" in capsys.readouterr().err
    assert provider.sent == [{"invoice_id": "INV-42", "amount": 1200}]


class Task:
    """What ``@task`` makes in both frameworks: the function kept (Airflow ``.function``,
    Prefect ``.fn``); called at a DAG's definition, it runs nothing."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.function = self.fn = fn

    def __call__(self, *args: Any, **kw: Any) -> None:
        return None


def decorator(*args: Any, **kw: Any) -> Any:
    if len(args) == 1 and callable(args[0]) and not kw:
        return Task(args[0])
    return Task


def stub(monkeypatch: pytest.MonkeyPatch, name: str, **attrs: Any) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    monkeypatch.setitem(sys.modules, name, module)


@dataclass
class TaskInstance:
    dag_id: str
    task_id: str
    try_number: int


def airflow_task(
    monkeypatch: pytest.MonkeyPatch, context: dict[str, Any]
) -> Callable[[dict[str, Any]], str]:
    """The DAG's task as Airflow would run it with ``params`` (the invoice)."""
    stub(monkeypatch, "airflow")
    stub(
        monkeypatch,
        "airflow.sdk",
        dag=lambda **kw: lambda fn: fn,
        task=decorator,
        get_current_context=lambda: context,
    )
    sys.modules.pop("airflow_dag", None)
    task = importlib.import_module("airflow_dag").send_invoice.function

    def run(params: dict[str, Any]) -> str:
        context["params"] = params
        return str(task())

    return run


def test_the_airflow_task_sends_once_and_holds_a_retry_after_a_lost_write(
    provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    run: dict[str, Any] = {"run_id": "manual__2026-12-06T09:00:00+00:00"}
    send = airflow_task(monkeypatch, {**run, "ti": TaskInstance("invoices", "send_invoice", 1)})
    assert send({"invoice_id": "INV-7", "amount": 5}) == "msg-1"
    with pytest.raises(LedgerError) as again:  # the same try run again: not written twice
        send({"invoice_id": "INV-7", "amount": 5})
    assert again.value.code == "earlier_go"
    retried = airflow_task(monkeypatch, {**run, "ti": TaskInstance("invoices", "send_invoice", 2)})
    assert retried({"invoice_id": "INV-7", "amount": 5}) == "msg-1"  # a new try: skip

    def lost(invoice: dict[str, Any]) -> str:
        raise TimeoutError("the provider did not answer")

    monkeypatch.setattr(sys.modules["invoices"], "post_invoice", lost)
    with pytest.raises(TimeoutError):
        send({"invoice_id": "INV-8", "amount": 5})
    with pytest.raises(Held) as held:
        retried({"invoice_id": "INV-8", "amount": 5})
    assert held.value.reason == "unknown_outcome"
    assert provider.sent == [{"invoice_id": "INV-7", "amount": 5}]


def test_the_prefect_task_sends_an_invoice_once(
    provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow_run = types.SimpleNamespace(id="0b9a3c0e-1d2f-4e5a-8b7c-6d5e4f3a2b1c")
    task_run = types.SimpleNamespace(run_count=1, task_name="send_invoice")
    stub(monkeypatch, "prefect", task=decorator, flow=decorator)
    stub(monkeypatch, "prefect.runtime", flow_run=flow_run, task_run=task_run)
    sys.modules.pop("prefect_flow", None)
    send = importlib.import_module("prefect_flow").send_invoice.fn
    assert send({"invoice_id": "INV-9", "amount": 70}) == "msg-1"
    task_run.run_count = 2  # a retried try, after the first was confirmed: skip
    assert send({"invoice_id": "INV-9", "amount": 70}) == "msg-1"
    assert provider.sent == [{"invoice_id": "INV-9", "amount": 70}]


def test_an_invoice_without_its_id_is_refused_before_any_call(provider: Provider) -> None:
    script = importlib.import_module("script")
    invoices = importlib.import_module("invoices")
    from flowledger.client import InvalidCall
    from flowledger.client import Ledger as Client

    with Client() as client, pytest.raises(InvalidCall, match="None"):
        invoices.send_invoice_guarded(client, {"amount": 5}, execution_id="r1", send=provider)
    assert provider.sent == [] and script is not None
