"""What every command shares: the app, the ``--db`` option, and one-line errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import wraps
from typing import Annotated, Any, TypeVar

import pydantic
import typer
from typer.core import TyperCommand

import flowledger
from flowledger.config import FileConfig, Settings, configured_secrets, load_config
from flowledger.domain.display import visible
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import LedgerError, Store, open_store, url_secrets

app = typer.Typer(
    name="flowledger",
    no_args_is_help=True,
    add_completion=False,
    # Help is plain click text: square brackets in it ("[alerts]", "[default: …]") are words,
    # not markup, and a flag reads `--once`, not `--once <bool>`.
    rich_markup_mode=None,
    context_settings={"max_content_width": 120},
    help="An audit ledger for workflow tools: business checkpoints that outlive execution history.",
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"flowledger {flowledger.__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit",
        ),
    ] = False,
) -> None:
    """Options that come before the command."""


DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="FLOWLEDGER_DB",
        show_envvar=True,
        metavar="PATH|URL",
        help="Ledger database: a file path or an SQLAlchemy URL [default: ./var/flowledger.db]",
    ),
]
# Where `run` and `serve` listen (their defaults come from [receiver] in flowledger.toml).
HostOption = Annotated[
    str | None, typer.Option(metavar="HOST", help="Address to listen on [receiver.host]")
]
PortOption = Annotated[
    int | None,
    typer.Option(min=0, max=65535, metavar="PORT", help="Port to listen on [receiver.port]"),
]


class Command(TyperCommand):
    """A command whose arguments read as click's do: ``OPERATION_ID`` in the usage line when
    required, ``[NAME]`` when not, and in the list of arguments by that name alone (typer
    writes a required one ``{OPERATION_ID}`` and lists it as ``OPERATION_ID <str>``). Give it
    to every command that takes an argument: ``@app.command(cls=Command)``."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [
            piece[1:-1] if piece.startswith("{") and piece.endswith("}") else piece
            for piece in super().collect_usage_pieces(ctx)
        ]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((param.metavar or record[0], record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


F = TypeVar("F", bound=Callable[..., Any])


def die(message: str, code: int = 2) -> None:
    typer.echo(f"flowledger: {visible(message)}", err=True)
    raise typer.Exit(code)


def one_line_errors(fn: F) -> F:
    """Turn a :class:`LedgerError` (and bad settings) into one line on stderr and exit 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LedgerError as exc:
            die(str(exc))
        except pydantic.ValidationError as exc:
            err = exc.errors()[0]
            die(f"bad setting FLOWLEDGER_{str(err['loc'][0]).upper()}: {err['msg']}")

    return wrapper  # type: ignore[return-value]


def parse_since(value: str | None, option: str = "--since") -> datetime | None:
    """An ISO 8601 time from the command line; UTC when it names no offset."""
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        die(f"{option} {value!r} is not an ISO 8601 time (e.g. 2026-11-02T08:00+01:00)")
        raise  # unreachable: die exits
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def settings() -> Settings:
    return Settings()


@contextmanager
def opened(db: str | None) -> Iterator[Store]:
    store = open_store(db)
    try:
        yield store
    finally:
        store.dispose()


def ledger_for(
    store: Store,
    env: Settings | None = None,
    file: FileConfig | None = None,
    more_secrets: Sequence[str] = (),
) -> Ledger:
    """The services as configured: environment first, then ``flowledger.toml``; every
    configured secret (and ``more_secrets``, and the password of the database URL in use,
    from ``--db`` or ``FLOWLEDGER_DB``) is redacted from outside text before it is stored."""
    env = env or settings()
    file = file or load_config()
    deadline = (
        timedelta(seconds=env.dispatch_deadline_seconds)
        if env.dispatch_deadline_seconds
        else file.sweep.dispatch_deadline
    )
    return Ledger(
        store,
        secret=env.secret_bytes(),
        max_attempts=env.max_attempts or file.max_attempts,
        dispatch_deadline=deadline,
        hold_deadlines=file.sweep.hold_deadlines,
        alert_urls=file.alerts.urls,
        secrets=configured_secrets(env, file, *more_secrets, *url_secrets(store.url)),
    )
