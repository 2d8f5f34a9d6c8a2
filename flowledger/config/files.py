"""Where the settings come from: ``flowledger.toml`` (:func:`load_config`, its errors in the
ledger's own words) and the environment (:class:`Settings`), and every secret they know."""

from __future__ import annotations

import difflib
import os
import tomllib
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from flowledger.config.sections import FileConfig, LogFormat
from flowledger.domain.redact import Secrets, secrets_of
from flowledger.storage.problems import LedgerError

CONFIG_FILE = "flowledger.toml"


def config_path() -> Path | None:
    explicit = os.environ.get("FLOWLEDGER_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise LedgerError(f"FLOWLEDGER_CONFIG points at {path}, which is not a file")
        return path
    local = Path.cwd() / CONFIG_FILE
    return local if local.is_file() else None


def load_config(path: Path | None = None) -> FileConfig:
    """Read and validate the file; a missing file means the defaults. Errors are one line
    that starts with the file (``PATH: ``) and names the key, or the line of broken TOML."""
    path = path or config_path()
    if path is None:
        return FileConfig()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LedgerError(f"{path}: cannot read it: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise LedgerError(f"{path}: cannot read it: not UTF-8 ({exc.reason})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise LedgerError(f"{path}: not valid TOML: {exc}") from exc
    try:
        return FileConfig.model_validate(raw)
    except ValueError as exc:
        errors = getattr(exc, "errors", None)
        if callable(errors):
            found = errors()
            # An unknown key first: a misspelt one also makes the real key "missing".
            first = next((e for e in found if e["type"] == "extra_forbidden"), found[0])
            where = ".".join(str(p) for p in first["loc"])
            if first["type"] == "extra_forbidden":
                raise LedgerError(f"{path}: {where}: {_unknown_key(first['loc'])}") from exc
            raise LedgerError(f"{path}: {where}: {in_our_words(first)}") from exc
        raise LedgerError(f"{path}: {exc}") from exc


def in_our_words(err: Any) -> str:
    """One of pydantic's errors about a setting in the ledger's words: a validator's own
    sentence (a duration, a URL, a kind) as it raised it, without pydantic's ``Value error,``;
    a number out of its range or not a number said plainly."""
    ctx = err.get("ctx") or {}
    kind = err.get("type")
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "must be a whole number"
    if kind in ("float_parsing", "float_type"):
        return "must be a number"
    if kind == "greater_than_equal":
        return f"must be at least {ctx['ge']}"
    if kind == "less_than_equal":
        return f"must be at most {ctx['le']}"
    return str(err.get("msg", "invalid value")).removeprefix("Value error, ")


def _unknown_key(loc: tuple[str | int, ...]) -> str:
    """ "unknown key; did you mean …?" with the closest key the file's section takes."""
    model: Any = FileConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue  # an item of a list of sections: the section's own model
        field = model.model_fields.get(part)
        annotation = field.annotation if field is not None else None
        model = next(
            (
                t
                for t in (annotation, *typing.get_args(annotation))
                if isinstance(t, type) and issubclass(t, BaseModel)
            ),
            None,
        )
        if model is None:
            return "unknown key"
    known = list(model.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return f"unknown key; this section takes {', '.join(known)}"


class Settings(BaseSettings):
    """The environment's part: the database and the secret."""

    model_config = SettingsConfigDict(env_prefix="FLOWLEDGER_", extra="ignore")

    db: str | None = Field(default=None, description="SQLite path or SQLAlchemy URL")
    secret: SecretStr | None = Field(
        default=None, description="key for HMAC input hashes (recommended)"
    )
    max_attempts: int | None = Field(default=None, ge=1, le=1000)
    dispatch_deadline_seconds: int | None = Field(default=None, ge=1, le=30 * 86400)
    log_format: LogFormat | None = None

    def secret_bytes(self) -> bytes | None:
        return self.secret.get_secret_value().encode() if self.secret else None


def configured_secrets(env: Settings, file: FileConfig, *more: str) -> Secrets:
    """Every secret the configuration knows, prepared for the redactor: the ledger's own
    secret, each source's API key and password, what the alert URLs carry, and ``more``
    (the receiver adds the tokens' signing secrets)."""
    values = [env.secret.get_secret_value() if env.secret else None, *more]
    for source in file.sources:
        values.extend(source.secrets())
    values.extend(file.alerts.secrets())
    return secrets_of(values)
