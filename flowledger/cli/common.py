"""What every command shares: the app, the ``--db`` option, one-line errors, the exit codes,
JSON output and the reading of a time option.

Nothing here, and nothing at the top of a command's module, loads the database, the settings'
models, HTTP, the terminal UI or the scheduler: those load inside the commands that use them,
so that ``flowledger --help`` and ``flowledger COMMAND --help`` answer at once.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

import flowledger
from flowledger.domain import times
from flowledger.domain.display import visible
from flowledger.storage.problems import LedgerError, Missing

if TYPE_CHECKING:
    from flowledger.config import FileConfig, Settings
    from flowledger.services.ledger import Ledger
    from flowledger.storage.engine import Store

# The exit codes, the same for every command.
FAILED = 1  # a check found a problem, a source failed, or the person answered no
BAD_INPUT = 2  # an option, an argument or a setting is wrong, or the ledger cannot be opened
NOT_FOUND = 3  # the operation, hold, source, token or row named is not there
CONFLICT = 4  # someone else got there first: the hold was resolved before this action
EXIT_CODES = (
    "Exit codes: 0 done; 1 a check failed (verify, sources check, a sync) or the answer was "
    "no; 2 bad input (an option, a setting, a database that cannot be opened); 3 not found "
    "(the operation, hold, source or token named); 4 someone else got there first (the hold "
    "was resolved before your action)."
)

# `-h` as well as `--help`, on every command and group (their contexts inherit it).
CONTEXT: dict[str, Any] = {"max_content_width": 120, "help_option_names": ["-h", "--help"]}


# click's error for a command line it cannot take (typer has a copy of click of its own, whose
# BadParameter is one).
UsageError: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError"
)

# The context click gives a command (typer.Context is a subclass the commands are not given).
ClickContext: type[Any] = typer.Context.__mro__[1]


class UsageInOneLine(UsageError):  # type: ignore[misc,valid-type]
    """A command line refused in one line, as every other refusal (click writes the usage,
    a hint and the error on four)."""

    def show(self, file: Any = None) -> None:
        typer.echo(f"flowledger: {visible(self.message)}", err=True)


def _in_one_line(exc: Exception, ctx: Any) -> Exception:
    if isinstance(exc, UsageInOneLine) or type(exc).__name__ == "NoArgsIsHelpError":
        return exc  # said already, or the help of a group given no command
    where = getattr(exc, "ctx", None) or ctx
    format_message = getattr(exc, "format_message", lambda: str(exc))
    said = format_message().rstrip(".")
    return UsageInOneLine(f"{said} (see {where.command_path} -h)")


class Group(TyperGroup):
    """A group of commands (the app and each of its groups: ``cls=Group``): a command line
    it cannot take is refused in one line (:class:`UsageInOneLine`), and its help flag is
    False when not given (typer reads a flag left None through pydantic, which would load it
    for every ``flowledger COMMAND --help`` on the way to the command)."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option

    def make_context(self, info_name: Any, args: Any, parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except UsageError as exc:
            raise _in_one_line(exc, parent) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            raise _in_one_line(exc, ctx) from None


app = typer.Typer(
    name="flowledger",
    cls=Group,
    no_args_is_help=True,
    add_completion=False,
    # Help is plain click text: square brackets in it ("[alerts]", "[default: …]") are words,
    # not markup, and a flag reads `--once`, not `--once <bool>`.
    rich_markup_mode=None,
    context_settings=CONTEXT,
    help="An audit ledger for workflow tools: business checkpoints that outlive execution history.",
    epilog=EXIT_CODES,
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
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON")]
# Where `run` and `serve` listen (their defaults come from [receiver] in flowledger.toml).
HostOption = Annotated[
    str | None, typer.Option(metavar="HOST", help="Address to listen on [receiver.host]")
]
PortOption = Annotated[
    int | None,
    typer.Option(min=0, max=65535, metavar="PORT", help="Port to listen on [receiver.port]"),
]
# TLS served by `run` and `serve` themselves (both or neither; [receiver] tls_cert, tls_key).
TlsCertOption = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        help="Serve HTTPS with this PEM certificate (its chain after it) [receiver.tls_cert]",
    ),
]
TlsKeyOption = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        help="The certificate's PEM private key, unencrypted [receiver.tls_key]",
    ),
]
# How `run` and `serve` log (over FLOWLEDGER_LOG_FORMAT, over [receiver] log_format).
LogFormatOption = Annotated[
    str | None,
    typer.Option(
        metavar="plain|json",
        help="Log one line of text a record, or one JSON object [receiver.log_format]",
    ),
]
LOG_FORMATS = ("plain", "json")


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


def die(message: str, code: int = BAD_INPUT) -> NoReturn:
    typer.echo(f"flowledger: {visible(message)}", err=True)
    raise typer.Exit(code)


def one_line_errors(fn: F) -> F:
    """Give every command the same start and the same refusals: ``flowledger.toml`` checked
    first (:func:`file_settings`), unless the command handles a broken one itself
    (:func:`handles_broken_settings`), reads none (:func:`reads_no_settings`) or is a
    group's callback on the way to one of its commands, which checks it; then a
    :class:`LedgerError` (and bad settings) turned into one line on stderr: exit
    :data:`NOT_FOUND` for a :class:`Missing` name or id, :data:`BAD_INPUT` for the rest."""
    checks_settings = not (
        getattr(fn, BROKEN_SETTINGS_HANDLED, False) or getattr(fn, READS_NO_SETTINGS, False)
    )

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            if checks_settings and not _on_the_way(args, kwargs):
                file_settings()
            return fn(*args, **kwargs)
        except Missing as exc:
            die(str(exc), NOT_FOUND)
        except LedgerError as exc:
            die(str(exc))
        except Exception as exc:
            # Bad settings: pydantic is loaded by then (and only then) by the settings.
            pydantic = sys.modules.get("pydantic")
            if pydantic is None or not isinstance(exc, pydantic.ValidationError):
                raise
            from flowledger.config import in_our_words

            err = exc.errors()[0]
            die(f"bad setting FLOWLEDGER_{str(err['loc'][0]).upper()}: {in_our_words(err)}")

    return wrapper  # type: ignore[return-value]


# Set on a command that reads flowledger.toml in its own way (:func:`handles_broken_settings`).
BROKEN_SETTINGS_HANDLED = "flowledger_handles_broken_settings"
# Set on a command that reads nothing of flowledger.toml (:func:`reads_no_settings`).
READS_NO_SETTINGS = "flowledger_reads_no_settings"


def handles_broken_settings(fn: F) -> F:
    """Mark a command that is not refused a broken ``flowledger.toml`` because it says so in
    its own way (``tui`` opens on the defaults, ``doctor`` reports it); put it under
    :func:`one_line_errors`. Every other command refuses the file before it starts."""
    setattr(fn, BROKEN_SETTINGS_HANDLED, True)
    return fn


def reads_no_settings(fn: F) -> F:
    """Mark a command that reads nothing of ``flowledger.toml`` (a witness's, run on another
    team's machine from any folder): a broken file where it runs is none of its business. Put
    it under :func:`one_line_errors`."""
    setattr(fn, READS_NO_SETTINGS, True)
    return fn


def _on_the_way(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether this is a group's callback run on the way to one of its commands (``sources``
    before ``sources check``): the command checks the settings, after its ``--help``."""
    return any(
        isinstance(value, ClickContext) and value.invoked_subcommand is not None
        for value in (*args, *kwargs.values())
    )


def file_settings() -> FileConfig:
    """``flowledger.toml`` as every command reads it (:func:`flowledger.config.load_config`):
    the defaults when there is none, and a broken one refused in the one line that names the
    file and what is wrong (an unknown key with the key it was likely meant to be, a bad
    value, the line of broken TOML), exit :data:`BAD_INPUT`."""
    from flowledger.config import load_config

    try:
        return load_config()
    except LedgerError as exc:
        die(str(exc))


def one_of(option: str, value: str | None, allowed: Collection[str], code: int = BAD_INPUT) -> None:
    """Refuse a value outside its closed set in one line naming the allowed ones, in their
    order when given as a sequence (``code``: :data:`NOT_FOUND` when the set is of names
    looked up, such as sources)."""
    if value is not None and value not in allowed:
        known = ", ".join(allowed if isinstance(allowed, Sequence) else sorted(allowed)) or "none"
        die(f"{option} {value!r} is not one of: {known}", code)


def json_default(value: Any) -> Any:
    """A value JSON has no type for: a time as every JSON gives it (ISO 8601 in UTC,
    :func:`flowledger.domain.times.for_machines`)."""
    if isinstance(value, datetime):
        return times.for_machines(value)
    raise TypeError(type(value).__name__)


def echo_json(value: Any) -> None:
    """``value`` as every ``--json`` prints it: indented, times in ISO 8601 in UTC."""
    typer.echo(json.dumps(value, default=json_default, indent=2))


def parse_since(value: str | None, now: datetime, option: str = "--since") -> datetime | None:
    """A past time as the terminal UI reads a typed time (:func:`flowledger.domain.times.read`,
    in UTC): ``-2h`` or ``2h`` two hours ago, ``8am`` the last 8:00, ``yesterday 18:00``, or
    ISO 8601. A time after now is refused: it would select nothing."""
    if value is None:
        return None
    try:
        when = times.read(value, now, UTC, ahead=False)
    except ValueError as exc:
        die(f"{option} {value!r}: {exc}; give {times.PAST_FORMS}")
    if when > now:
        die(f"{option} {value!r} is in the future ({times.for_people(when)}); give a past time")
    return when


def settings() -> Settings:
    from flowledger.config import Settings

    return Settings()


def logging_as(file: FileConfig, env: Settings, log_format: str | None) -> FileConfig:
    """``file`` with the log format ``run`` and ``serve`` take: the option's, else the
    environment's, else the file's own."""
    one_of("--log-format", log_format, LOG_FORMATS)
    chosen = log_format or env.log_format or file.receiver.log_format
    receiver = file.receiver.model_copy(update={"log_format": chosen})
    return file.model_copy(update={"receiver": receiver})


@contextmanager
def opened(db: str | None) -> Iterator[Store]:
    from flowledger.storage.engine import open_store

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
    """The services as configured: environment first, then ``flowledger.toml``
    (:func:`file_settings` unless given); every configured secret (and ``more_secrets``, and
    the password of the database URL in use, from ``--db`` or ``FLOWLEDGER_DB``) is redacted
    from outside text before it is stored."""
    from flowledger.config import configured_secrets
    from flowledger.services.ledger import Ledger
    from flowledger.storage.engine import url_secrets

    env = env or settings()
    file = file or file_settings()
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
        twin_window=file.receiver.twin_window,
        alert_urls=file.alerts.urls,
        pin_sources=[s.name for s in file.sources if s.kind == "n8n" and s.pin_evidence],
        secrets=configured_secrets(env, file, *more_secrets, *url_secrets(store.url)),
    )
