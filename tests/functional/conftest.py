"""Fixtures for the terminal UI and operator commands: a demo ledger at a fixed time, and an
app over it with a fixed clock and no refresh timer (so that screens are reproducible); and a
port that is taken, for ``run`` and ``serve``; a checkpoint signing key the CLI is configured
with."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowledger.domain.checkpoints import Signer
from flowledger.programs import demo
from flowledger.services.ledger import Ledger
from flowledger.services.signing import create_key
from flowledger.storage.engine import Store, open_store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.reads.tree_proofs import ledger_origin
from flowledger.tui import FlowledgerApp, make_app
from tests.support.builders import SHIFT_END, FakeClock


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port held by a listening socket of the test."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo shift, built once; each test gets its own copy of the file."""
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    # One identity on every run: the genesis, and so every hash the screens show, follows it.
    store, _ = init_ledger(str(path), ledger_id="00000000-0000-4000-8000-00000000d3a0")
    demo.mark_demo(store)
    demo.build_demo(store, str(path), now=SHIFT_END)
    store.dispose()
    return path


def copy_demo(template: Path, to: Path) -> str:
    """A copy of the demo ledger at ``to`` (with its WAL, if any)."""
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{template}{suffix}")
        if source.exists():
            shutil.copyfile(source, f"{to}{suffix}")
    return str(to)


@pytest.fixture
def demo_store(demo_template: Path, tmp_path: Path) -> Iterator[Store]:
    store = open_store(copy_demo(demo_template, tmp_path / "demo.db"))
    yield store
    store.dispose()


@pytest.fixture
def shift_clock() -> FakeClock:
    return FakeClock(SHIFT_END)


@pytest.fixture
def demo_ledger(demo_store: Store, shift_clock: FakeClock) -> Ledger:
    return Ledger(demo_store, clock=shift_clock)


@pytest.fixture
def app_factory(demo_ledger: Ledger, shift_clock: FakeClock, tmp_path: Path):  # type: ignore[no-untyped-def]
    def build(**kw: object) -> FlowledgerApp:
        options: dict[str, object] = {
            "operator": "dave",
            "clock": shift_clock,
            "report_dir": tmp_path / "reports",
            "refresh_seconds": None,
        }
        options.update(kw)
        return make_app(demo_ledger, **options)  # type: ignore[arg-type]

    return build


@pytest.fixture
def configured_signer(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Signer:
    """A signing key for ``store``, set as ``[checkpoints] key`` of the CLI's configuration."""
    key = tmp_path / "checkpoint.key"
    made = create_key(key, ledger_origin(store))
    (tmp_path / "flowledger.toml").write_text(f'[checkpoints]\nkey = "{key}"\n')
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(tmp_path / "flowledger.toml"))
    return made
