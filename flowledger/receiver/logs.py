"""Logging for ``serve`` and ``run``: uvicorn's access log prints the path without its query
string, and no header, body or token is ever logged (the receiver logs nothing of a request but
its method, path, status and, for a failure, the error's class name). Every line, traceback
included, goes through the redactor on its way out (:class:`RedactLogs`): a job's error can
quote what a tool answered.

A record is one line either way: ``plain`` text, or ``json`` (:class:`JsonLines`, one object a
line, for a log shipper), chosen by ``[receiver] log_format``."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from flowledger.config import LogFormat
from flowledger.domain.redact import NO_SECRETS, Secrets, redact


class DropQueryString(logging.Filter):
    """uvicorn's access record is ``(client, method, path?query, http_version, status)``."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])
        return True


# The secrets to redact, or where to read them as they are now (the ledger's, which grow
# when a signing token is created while the receiver runs).
Known = Secrets | Callable[[], Secrets]


class RedactLogs(logging.Filter):
    """Redacts a record's message and traceback (:func:`flowledger.domain.redact.redact` with the
    configured secrets) before any handler formats it."""

    def __init__(self, secrets: Known = NO_SECRETS) -> None:
        super().__init__()
        self.known = secrets

    @property
    def secrets(self) -> Secrets:
        return self.known if isinstance(self.known, Secrets) else self.known()

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "flowledger_redacted", False):
            return True  # a record passes each handler's filter: once is enough
        # Message and arguments each (uvicorn's access formatter reads the arguments apart).
        record.msg = self._clean(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(self._clean(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: self._clean(arg) for key, arg in record.args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, self.secrets)
        setattr(record, "flowledger_redacted", True)  # noqa: B010
        return True

    def _clean(self, value: object) -> object:
        """A number stays a number (``%d``); anything else is logged as its redacted text."""
        if value is None or isinstance(value, int | float):
            return value
        return redact(str(value), self.secrets)


PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonLines(logging.Formatter):
    """A record as one JSON object on one line: ``time`` (UTC, ISO 8601), ``level``,
    ``logger``, ``message`` and, when it has one, ``exc_info`` (the traceback as one string;
    with :class:`RedactLogs` on the handler, already redacted). uvicorn's access line is its
    record's own message (``client - "METHOD path HTTP/1.1" status``)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc_info"] = record.exc_text
        if record.stack_info:
            line["stack_info"] = record.stack_info
        return json.dumps(line, ensure_ascii=False, default=str)


def formatter(log_format: LogFormat = "plain") -> dict[str, Any]:
    """The ledger's formatter for ``logging.config.dictConfig``."""
    return {"()": JsonLines} if log_format == "json" else {"format": PLAIN}


def stderr_handler(log_format: LogFormat = "plain") -> logging.Handler:
    """A handler on stderr in ``log_format`` (the root logger's, in ``run``)."""
    to_stderr = logging.StreamHandler()
    to_stderr.setFormatter(JsonLines() if log_format == "json" else logging.Formatter(PLAIN))
    return to_stderr


def redact_handlers(logger: logging.Logger, secrets: Known) -> None:
    """Put :class:`RedactLogs` on every handler of ``logger`` (the root logger of ``run``)."""
    for handler in logger.handlers:
        if not any(isinstance(f, RedactLogs) for f in handler.filters):
            handler.addFilter(RedactLogs(secrets))


def ledger_log_config(
    level: str = "info", secrets: Known = NO_SECRETS, log_format: LogFormat = "plain"
) -> dict[str, Any]:
    """The ledger's own loggers, and the root logger, on stderr, redacted: what the writer
    process logs with (it runs no server, so none of uvicorn's loggers or formatters)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"redact": {"()": RedactLogs, "secrets": secrets}},
        "formatters": {"default": formatter(log_format)},
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "formatter": "default",
                "filters": ["redact"],
                "stream": "ext://sys.stderr",
            },
        },
        "loggers": {
            "flowledger": {"handlers": ["default"], "level": level.upper(), "propagate": False},
        },
        "root": {"handlers": ["default"], "level": "WARNING"},
    }


def log_config(
    level: str = "info", secrets: Known = NO_SECRETS, log_format: LogFormat = "plain"
) -> dict[str, Any]:
    """uvicorn's loggers (its access log on stdout, without query strings) beside the ledger's
    own (:func:`ledger_log_config`), redacted; the root logger is left to the process (``run``
    puts its own handlers there)."""
    config = ledger_log_config(level, secrets, log_format)
    del config["root"]
    config["filters"]["no_query"] = {"()": DropQueryString}
    config["formatters"]["access"] = (
        formatter("json")
        if log_format == "json"
        else {
            "()": "uvicorn.logging.AccessFormatter",
            "fmt": '%(asctime)s access %(client_addr)s "%(request_line)s" %(status_code)s',
            "use_colors": False,
        }
    )
    config["handlers"]["access"] = {
        "class": "logging.StreamHandler",
        "formatter": "access",
        "filters": ["no_query", "redact"],
        "stream": "ext://sys.stdout",
    }
    config["loggers"].update(
        {
            "uvicorn": {"handlers": ["default"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        }
    )
    return config
