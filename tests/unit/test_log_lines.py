"""The receiver's log lines in JSON (``[receiver] log_format = "json"``): one object a line,
redacted as the plain lines are, and the format chosen by option, environment or file."""

from __future__ import annotations

import json
import logging
import logging.config
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from flowledger.cli.common import logging_as
from flowledger.config import FileConfig, ReceiverConfig, Settings
from flowledger.domain.redact import MARK, secrets_of
from flowledger.receiver.logs import log_config

KEY = "n8nKey_Q7f3Z9xL2mP4vR8sT1uW"
LOGGERS = ("flowledger", "uvicorn", "uvicorn.error", "uvicorn.access")


@contextmanager
def json_logs() -> Iterator[None]:
    """Within a test: the handlers take sys.stdout and sys.stderr as capsys has made them."""
    logging.config.dictConfig(log_config(secrets=secrets_of([KEY]), log_format="json"))
    try:
        yield
    finally:
        for name in LOGGERS:  # as it was: later tests read these through caplog
            logger = logging.getLogger(name)
            logger.handlers.clear()
            logger.propagate = True
            logger.setLevel(logging.NOTSET)


def records(text: str) -> list[dict[str, str]]:
    return [json.loads(line) for line in text.splitlines()]


def test_a_record_with_a_traceback_is_one_json_line_with_its_traceback_redacted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with json_logs():
        try:
            raise RuntimeError(f"the tool answered\n{KEY}")
        except RuntimeError:
            logging.getLogger("flowledger.scheduled").exception("job sync:prod failed: %s", KEY)
    [line] = records(capsys.readouterr().err)
    assert set(line) == {"time", "level", "logger", "message", "exc_info"}
    assert line["level"] == "ERROR" and line["logger"] == "flowledger.scheduled"
    assert line["message"] == f"job sync:prod failed: {MARK}"
    assert line["exc_info"].startswith("Traceback") and "RuntimeError" in line["exc_info"]
    assert KEY not in json.dumps(line) and KEY.lower() not in json.dumps(line).lower()
    assert line["time"].endswith("+00:00")


def test_the_access_line_is_json_without_its_query_string(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with json_logs():
        logging.getLogger("uvicorn.access").info(
            '%s - "%s %s HTTP/%s" %d',
            *("127.0.0.1:5000", "POST", f"/v1/operations/{KEY}/confirm?token=x", "1.1", 200),
        )
    [line] = records(capsys.readouterr().out)
    assert line["logger"] == "uvicorn.access" and line["level"] == "INFO"
    assert line["message"] == f'127.0.0.1:5000 - "POST /v1/operations/{MARK}/confirm HTTP/1.1" 200'


@pytest.mark.parametrize(
    ("option", "env", "file", "chosen"),
    [
        (None, None, "plain", "plain"),
        (None, None, "json", "json"),
        (None, "json", "plain", "json"),
        ("plain", "json", "json", "plain"),
    ],
    ids=["file", "file json", "environment over file", "option over both"],
)
def test_the_log_format_is_the_options_then_the_environments_then_the_files(
    option: str | None, env: str | None, file: str, chosen: str
) -> None:
    settings = Settings.model_validate({"log_format": env})
    config = FileConfig(receiver=ReceiverConfig.model_validate({"log_format": file}))
    assert logging_as(config, settings, option).receiver.log_format == chosen


def test_an_unknown_log_format_is_refused_in_the_file() -> None:
    with pytest.raises(ValueError, match="log_format"):
        ReceiverConfig.model_validate({"log_format": "xml"})
