"""The generated parts of docs/: the commands from the typer app (``flowledger.cli``) and the
settings from the settings models (``flowledger.config``), each written between the markers

    <!-- generated: NAME (make docs) -->
    <!-- end generated -->

in its file, the hand-written text around them left as it is; and the terminal UI's screenshot
(docs/tui.svg) over the demo shift.

    python docs/generate.py            write every generated part, then the screenshot
    python docs/generate.py --check    exit 1 naming each stale file (the screenshot aside)

``make docs`` runs the first; tests/unit/test_docs_generated.py runs :func:`stale`.

Only public interfaces: the click command objects ``typer.main.get_command`` builds,
pydantic's ``model_fields`` and Textual's ``save_screenshot``. A command, option or setting
without a help text or description is an error here, not an empty cell there.
"""

from __future__ import annotations

import json
import re
import sys
import typing
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
BEGIN = "<!-- generated: {name} (make docs) -->"
END = "<!-- end generated -->"


class Undocumented(Exception):
    """A command, option or setting with nothing to say about it."""


# --- commands -------------------------------------------------------------------------------


def _cell(text: str) -> str:
    """``text`` as one Markdown table cell: one line, ``|`` escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _commands() -> Iterator[tuple[str, Any, Any]]:
    """Every command under ``flowledger``, as ``flowledger --help`` lists them, groups
    followed by their own commands: its full name, its click command and its context."""
    import typer

    import flowledger.cli  # noqa: F401  (registers the commands)
    from flowledger.cli.common import app

    root = typer.main.get_command(app)
    top = root.make_context("flowledger", [], resilient_parsing=True)

    def walk(group: Any, ctx: Any, prefix: str) -> Iterator[tuple[str, Any, Any]]:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            sub = command.make_context(name, [], parent=ctx, resilient_parsing=True)
            yield f"{prefix} {name}", command, sub
            if hasattr(command, "list_commands"):  # a group (typer carries its own click)
                yield from walk(command, sub, f"{prefix} {name}")

    yield "flowledger", root, top
    yield from walk(root, top, "flowledger")


def _params(command: Any, ctx: Any) -> list[tuple[str, str]]:
    help_names = set(ctx.help_option_names)
    rows = []
    for param in command.get_params(ctx):
        if param.hidden or help_names & set(getattr(param, "opts", ())):
            continue
        record = param.get_help_record(ctx)
        if param.param_type_name == "argument":
            shown = param.metavar or (param.name or "").upper()
            text = record[1] if record else ""
        else:
            shown, text = record if record else (", ".join(param.opts), "")
        if not text.strip():
            raise Undocumented(f"{command.name}: {shown} has no help text")
        rows.append((shown, text))
    return rows


def commands_reference() -> str:
    """Each command: its help, its usage line, a table of its arguments and options."""
    out: list[str] = []
    for full, command, ctx in _commands():
        help_text = (command.help or "").strip()
        if not help_text:
            raise Undocumented(f"{full} has no help text")
        if command.epilog:
            help_text += "\n\n" + command.epilog.strip()
        level = "##" if full.count(" ") <= 1 else "###"
        out += [f"{level} `{full}`", "", help_text, "", "```", f"{full} "]
        out[-1] += " ".join(command.collect_usage_pieces(ctx))
        out += ["```", ""]
        rows = _params(command, ctx)
        if rows:
            out += ["| argument or option | meaning |", "|---|---|"]
            out += [f"| `{_cell(shown)}` | {_cell(text)} |" for shown, text in rows]
            out.append("")
    return "\n".join(out).rstrip("\n")


# --- settings -------------------------------------------------------------------------------


def _duration(value: timedelta) -> str:
    seconds = value.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        # Whole days from two on ("2d"); a day is "24h", as people say it.
        if seconds >= size * (2 if unit == "d" else 1) and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds}s"


def _default(field: Any) -> str:
    from pydantic import BaseModel
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "-"
    if isinstance(value, timedelta):
        return f'`"{_duration(value)}"`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, list):  # as TOML writes it
        return f"`{json.dumps(value)}`"
    return f"`{value!r}`"


def _kind(annotation: Any) -> str:
    """What a setting takes, in the words of a TOML file."""
    from pydantic import SecretStr

    names = {
        str: "text",
        int: "integer",
        bool: "true or false",
        Path: "file path",
        timedelta: "duration",
        SecretStr: "text (secret)",
    }
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kind(args[0])
    if origin is list:
        return f"list of {_kind(args[0])}"
    if args and origin is not list:  # Optional[X]
        return _kind(args[0])
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(field: Any) -> str:
    found = {type(m).__name__: m for m in field.metadata}
    low = found.get("Ge")
    high = found.get("Le")
    parts = []
    if low is not None:
        parts.append(f"≥ {low.ge}")
    if high is not None:
        parts.append(f"≤ {_duration(high.le) if isinstance(high.le, timedelta) else high.le}")
    return f" ({', '.join(parts)})" if parts else ""


# What each setting means, by the name the tables show. The settings models hold the names,
# types, bounds and defaults; a meaning written in a model (a field's ``description``, a
# section's docstring) is used when this holds none. A setting with neither, or a name here
# that is no setting, is an error, so that the two cannot drift apart.
MEANINGS: dict[str, str] = {
    "FLOWLEDGER_DB": (
        "The ledger database: an SQLite file path or an SQLAlchemy URL such as "
        "`postgresql://user@host/db` (unset: `./var/flowledger.db`)"
    ),
    "FLOWLEDGER_SECRET": (
        "The key for HMAC input hashes (`hmac-sha256:`; recommended): without it inputs hash to "
        "`sha256:`. Set it before the first write and keep it: an operation's hash is made "
        "when it is first recorded, so changing, adding or removing it later makes each "
        "existing operation's next dispatch an `input_mismatch` ([why](production.md#settings)). "
        "`token create --signing` and the receiver of signing tokens need it too."
    ),
    "FLOWLEDGER_MAX_ATTEMPTS": (
        "Dispatches allowed an operation (over `max_attempts` in `flowledger.toml`, 5 by default)."
    ),
    "FLOWLEDGER_DISPATCH_DEADLINE_SECONDS": (
        "How long a `dispatching` operation waits for its confirm, in seconds (over `[sweep] "
        "dispatch_deadline`, 15m by default)."
    ),
    "FLOWLEDGER_LOG_FORMAT": (
        "How `run` and `serve` log, `plain` or `json` (over `[receiver] log_format`; "
        "`--log-format` wins over it)."
    ),
    "max_attempts": "Dispatches allowed an operation before a `max_attempts` hold.",
    "[[sources]] name": "The source's name, as commands, holds and dispatches (`source`) name it.",
    "[[sources]] kind": (
        "The workflow tool: `n8n`, `airflow` (Airflow 3.x, `/api/v2`), or `prefect` (a Prefect 3 "
        "server or Prefect Cloud; `base_url` is its `PREFECT_API_URL`)."
    ),
    "[[sources]] base_url": (
        "Where the tool's API answers, `http://` or `https://`, without a query."
    ),
    "[[sources]] api_key_env": (
        "The environment variable holding the API key (n8n: scopes `execution:list`, "
        "`execution:read`, `workflow:list` for workflow names and `workflow:read` for the "
        "workflow version check; Prefect Cloud: an API key, "
        "sent as a Bearer token); the key itself never goes in the file."
    ),
    "[[sources]] username_env": (
        "Airflow: the environment variable holding the user for `POST /auth/token` (without it and "
        "`password_env`, `GET /auth/token`). Prefect: the user of a server's "
        "`PREFECT_SERVER_API_AUTH_STRING` (Basic auth)."
    ),
    "[[sources]] password_env": (
        "Airflow or Prefect: the environment variable holding that user's password."
    ),
    "[[sources]] interval": "How often `flowledger run` syncs this source.",
    "[[sources]] page_size": (
        "Executions asked for a page (n8n allows at most 250, Airflow its `maximum_page_limit`, 100"
        " by default, Prefect 200)."
    ),
    "[[sources]] custom_data_workflows": (
        "Workflow ids whose executions are read with their data, to link them to the operations "
        "named in their `customData`."
    ),
    "[[sources]] custom_data_key": (
        "The `customData` key that names an operation id (Prefect: the tag prefix, "
        "`<key>:<operation id>`)."
    ),
    "[[sources]] reconcile_interval": (
        "How often a sync walks the tool's whole list to notice pruned and deleted executions."
    ),
    "[[sources]] connect_timeout": (
        "How long to wait for the tool to accept a connection (at most 10m)."
    ),
    "[[sources]] timeout": "How long to wait for each answer once connected (at most 10m).",
    "[[sources]] pin_evidence": (
        "n8n: keep the execution an open hold is about from n8n's pruning (an execution "
        "annotation; scope `executionTags:update`). See docs/acting.md."
    ),
    "[[sources]] pin_tag_id": (
        "n8n: the id of an annotation tag (made in n8n's UI) the pin carries, so pinned "
        "executions show there; none by default. See docs/acting.md."
    ),
    "[[sources]] version_reads": (
        "n8n: executions that dispatched an operation read by id, at most this many a sync "
        "run, for the workflow version they ran (the rest wait for the next run, oldest "
        "first); 0 turns the `stale_workflow_version` check off. See docs/operations.md."
    ),
    "[sweep] interval": "How often `flowledger run` sweeps.",
    "[sweep] dispatch_deadline": (
        "How long a `dispatching` operation without a deadline of its own waits for its confirm or "
        "fail before it is held (`unknown_outcome`)."
    ),
    "[sweep] stale_prepared_after": (
        "How long an operation may stay `prepared` before a `stale_prepared` hold."
    ),
    "[sweep] execution_stuck_after": (
        "How long an execution may be `running` before an `execution_stuck` hold."
    ),
    "[sweep] source_stale_intervals": (
        "How many of its intervals a source may go without a successful sync before a "
        "`source_stale` hold."
    ),
    "[sweep] blocking_hold_deadline": (
        "The deadline a new blocking hold gets; past it, an `overdue` hold."
    ),
    "[sweep] hold_deadline": (
        "The deadline a new non-blocking hold gets; past it, an `overdue` hold."
    ),
    "[alerts] urls": (
        "Where new and overdue holds (and, with `[anchors] alerts`, chain heads) are posted as "
        "JSON."
    ),
    "[alerts] timeout": "How long one delivery may take.",
    "[alerts] max_backoff": (
        "The longest wait between two tries of a failed delivery (5 s, 10 s, 20 s... up to it)."
    ),
    "[receiver]": "The webhook receiver that `serve` and `run` start.",
    "[receiver] host": "The address `serve` and `run` listen on.",
    "[receiver] port": "The port `serve` and `run` listen on.",
    "[receiver] body_limit": (
        "The largest request body in bytes, enforced while reading (413 past it)."
    ),
    "[receiver] body_timeout": (
        "How long a request's body may take to arrive once the receiver reads it (408 past "
        "it); the head's time is the reverse proxy's to bound (production.md)."
    ),
    "[receiver] max_connections": (
        "Connections served at once (uvicorn's `limit_concurrency`; 503 beyond)."
    ),
    "[receiver] max_connections_per_client": (
        "Connections one client address may hold at once, and requests in flight (behind a "
        "trusted proxy, of the address its `X-Forwarded-For` names); beyond it 429 "
        "`too_many_connections` at once and the connection closed (production.md)."
    ),
    "[receiver] trusted_proxies": (
        "The reverse proxies (addresses or networks) whose `X-Forwarded-For` names the client "
        "(uvicorn's `forwarded_allow_ips`); their own connections are not capped per address."
    ),
    "[receiver] keep_alive": (
        "How long an idle keep-alive connection is kept (uvicorn's `timeout_keep_alive`)."
    ),
    "[receiver] idempotency_ttl": "How long an `Idempotency-Key`'s answer is kept.",
    "[receiver] write_deadline": (
        "How long a call waits for its write: past it, 503 with `Retry-After` (the write may "
        "still happen; its retry with the same `Idempotency-Key` finds out). Below the n8n "
        "node's 10 s timeout (production.md, when the database hangs)."
    ),
    "[receiver] read_deadline": (
        "How long `/readyz` waits for the database before it answers 503 `not_ready` (keep it "
        "below the probe's own timeout), a GET route for its read (then 503), and a call for "
        "the refresh of the token list."
    ),
    "[receiver] signature_window": "How far a signed request's `t` may be from now.",
    "[receiver] twin_window": "Two executions of one workflow dispatching the same operation"
    " this close together are a twin trigger (a `duplicate_trigger` hold); `0s` turns it off"
    " ([twin triggers](operations.md#twin-triggers-duplicate_trigger)).",
    "[receiver] tls_cert": (
        "Serve HTTPS with this PEM certificate (its chain after it) rather than behind a TLS "
        "proxy; with `tls_key` (`--tls-cert` wins over it). Read at start."
    ),
    "[receiver] tls_key": (
        "The certificate's PEM private key, unencrypted (`--tls-key` wins over it); keep it "
        "readable by the ledger's user only."
    ),
    "[receiver] log_format": (
        "How `run` and `serve` log: `plain`, one line of text a record, or `json`, one JSON "
        "object a line (`time`, `level`, `logger`, `message`, and `exc_info` with a traceback) "
        "for a log shipper; `FLOWLEDGER_LOG_FORMAT` and `--log-format` win over it."
    ),
    "[scheduler] lease": (
        "How long the lease on the scheduled jobs lasts: another process takes them over once it "
        "expires."
    ),
    "[scheduler] alerts_interval": "How often the `alerts` job delivers the outbox.",
    "[scheduler] acting_interval": (
        "How often the `acting` job pins executions and makes the retries asked in n8n "
        "(`flowledger act --once`)."
    ),
    "[scheduler] housekeeping_interval": (
        "How often expired idempotency keys, signatures past their window and old delivered alerts "
        "are deleted."
    ),
    "[anchors] file": (
        "The append-only file heads are published to: outside the database's directory, in a "
        "directory that exists."
    ),
    "[anchors] interval": "How often the `anchors` job publishes the head (when it moved).",
    "[anchors] alerts": "Also post each new head to `[alerts] urls` (which must be set).",
    "[checkpoints] key": (
        "The Ed25519 signing key file (`flowledger key create`); one that others may read is "
        "refused. Unset, nothing is signed."
    ),
    "[checkpoints] witness_interval": (
        "How often the `witnesses` job of `run` signs a checkpoint and sends it to the "
        "`[[witnesses]]` (when the tree has grown past what one of them cosigned, or one "
        "failed last time)."
    ),
    "[[witnesses]] url": (
        "The witness's submission prefix: `POST {url}/add-checkpoint` (C2SP tlog-witness)."
    ),
    "[[witnesses]] vkey": (
        "The witness's verifier key, `name+id+base64` of type 0x04 (`flowledger witness key "
        "create` prints it); its cosignatures are verified with it before they are kept."
    ),
    "[[witnesses]] timeout": "How long one request to the witness may take.",
}


def _meaning(shown: str, described: str | None, used: set[str]) -> str:
    text = MEANINGS.get(shown) or described or ""
    if not text.strip():
        raise Undocumented(f"{shown} has no meaning: add one to MEANINGS in docs/generate.py")
    used.add(shown)
    return _cell(text.replace("``", "`"))


def _row(shown: str, field: Any, used: set[str]) -> str:
    kind = _cell(_kind(field.annotation) + _bounds(field))
    meaning = _meaning(shown, field.description, used)
    key = shown.rsplit(" ", 1)[-1]  # "[sweep] interval" is shown as interval, under [sweep]
    return f"| `{key}` | {kind} | {_default(field)} | {meaning} |"


def _table(model: Any, shown: Callable[[str], str], first: str, used: set[str]) -> list[str]:
    rows = [f"| {first} | takes | default | meaning |", "|---|---|---|---|"]
    rows += [_row(shown(name), field, used) for name, field in model.model_fields.items()]
    return rows


def _unused(used: set[str], names: Callable[[str], bool], meanings: Any = None) -> None:
    left = sorted(
        n for n in (MEANINGS if meanings is None else meanings) if names(n) and n not in used
    )
    if left:
        raise Undocumented(f"MEANINGS names no setting: {', '.join(left)}")


def settings_environment() -> str:
    from flowledger.config import Settings

    prefix = Settings.model_config.get("env_prefix", "")
    used: set[str] = set()
    rows = _table(Settings, lambda n: prefix + n.upper(), "variable", used)
    _unused(used, lambda n: n.startswith(prefix))
    return "\n".join(rows)


def settings_file() -> str:
    """``flowledger.toml``: its top-level keys, then one table a section."""
    import inspect

    from pydantic import BaseModel

    from flowledger.config import FileConfig

    used: set[str] = set()
    head = ["### Top-level keys", "", "| key | takes | default | meaning |", "|---|---|---|---|"]
    sections: list[str] = []
    for name, field in FileConfig.model_fields.items():
        annotation = field.annotation
        inner = typing.get_args(annotation)
        many = typing.get_origin(annotation) is list
        model = inner[0] if many and inner else annotation
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            head.append(_row(name, field, used))
            continue
        title = f"[[{name}]]" if many else f"[{name}]"
        about = inspect.getdoc(model) if model.__doc__ else None
        sections += [f"### `{title}`", "", _meaning(title, about, used), ""]
        sections += _table(model, f"{title} {{}}".format, "key", used)
        sections.append("")
    _unused(used, lambda n: not n.startswith("FLOWLEDGER_"))
    return "\n".join([*head, "", *sections]).rstrip("\n")


# --- files ----------------------------------------------------------------------------------

# Each file with its generated parts, by marker name.
PARTS: dict[str, dict[str, Callable[[], str]]] = {
    "commands.md": {"commands": commands_reference},
    "settings.md": {"environment": settings_environment, "file": settings_file},
}


def filled(text: str, parts: dict[str, Callable[[], str]], where: str) -> str:
    """``text`` with each part's block between its markers made anew."""
    for name, make in parts.items():
        begin = BEGIN.format(name=name)
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(END), re.DOTALL)
        if len(pattern.findall(text)) != 1:
            raise Undocumented(f"{where}: one '{begin}' … '{END}' block expected")
        start, end = pattern.search(text).span()  # type: ignore[union-attr]
        text = f"{text[:start]}{begin}\n{make()}\n{END}{text[end:]}"
    return text


def _changes() -> Iterator[tuple[Path, str]]:
    """Each generated file whose text is not what the code makes now, with that text."""
    for file, parts in PARTS.items():
        path = DOCS / file
        text = path.read_text(encoding="utf-8")
        new = filled(text, parts, file)
        if new != text:
            yield path, new


def stale() -> list[str]:
    return [str(path.relative_to(ROOT)) for path, _ in _changes()]


def write() -> list[str]:
    written = []
    for path, new in list(_changes()):
        path.write_text(new, encoding="utf-8")
        written.append(str(path.relative_to(ROOT)))
    return written


# --- the screenshot -------------------------------------------------------------------------

SCREENSHOT = DOCS / "tui.svg"
SCREEN_SIZE = (120, 36)


def screenshot(to: Path = SCREENSHOT) -> None:
    """The terminal UI's queue over the demo shift, at a fixed time and ledger id (so that it
    is the same on every run), saved as SVG."""
    import asyncio
    import tempfile
    from datetime import UTC, datetime

    from flowledger.programs import demo
    from flowledger.services.ledger import Ledger
    from flowledger.storage.migrate import init_ledger
    from flowledger.tui import make_app

    shift_end = datetime(2026, 11, 2, 17, 0, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "demo.db"
        store, _ = init_ledger(str(path), ledger_id="00000000-0000-4000-8000-00000000d3a0")
        try:
            demo.mark_demo(store)
            demo.build_demo(store, str(path), now=shift_end)
            app = make_app(
                Ledger(store, clock=lambda: shift_end),
                operator="dave",
                clock=lambda: shift_end,
                report_dir=Path(folder),
                refresh_seconds=None,
            )

            async def take() -> None:
                async with app.run_test(size=SCREEN_SIZE) as pilot:
                    await pilot.pause()
                    app.save_screenshot(filename=to.name, path=str(to.parent))

            asyncio.run(take())
        finally:
            store.dispose()
    # Textual names the SVG's classes after a hash that differs from run to run.
    to.write_text(re.sub(r"terminal-\d+", "terminal", to.read_text(encoding="utf-8")), "utf-8")


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        found = stale()
        for file in found:
            print(f"{file} is stale: run `make docs`", file=sys.stderr)
        return 1 if found else 0
    if argv:
        print("usage: python docs/generate.py [--check]", file=sys.stderr)
        return 2
    for file in write():
        print(f"wrote {file}")
    screenshot()
    print(f"wrote {SCREENSHOT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
