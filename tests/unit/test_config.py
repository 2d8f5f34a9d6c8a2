"""flowledger.toml: the defaults, the durations, and every bad file as one clear error."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from flowledger import domain
from flowledger.config import FileConfig, load_config, parse_duration
from flowledger.connectors.registry import KINDS
from flowledger.storage.engine import LedgerError

SOURCE = """
[[sources]]
name = "prod-n8n"
kind = "n8n"
base_url = "http://127.0.0.1:5678/"
api_key_env = "N8N_API_KEY"
interval = "90s"
"""


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "flowledger.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_no_file_means_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLOWLEDGER_CONFIG", raising=False)
    assert load_config() == FileConfig()


def test_a_source_is_read_with_its_interval_and_a_trimmed_url(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, SOURCE))
    src = cfg.source("prod-n8n")
    assert (src.interval, src.base_url) == (timedelta(seconds=90), "http://127.0.0.1:5678")
    with pytest.raises(LedgerError, match="no source named 'nope'"):
        cfg.source("nope")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("90s", 90),
        ("15m", 900),
        ("24h", 86400),
        ("2d", 172800),
        ("250ms", 0.25),
        (30, 30),
        ("0.000001s", 0.000001),  # the smallest: one microsecond
        ("36500d", 36500 * 86400),  # the longest: a hundred years
    ],
)
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "value",
    [
        "soon",
        "-5m",
        "0s",
        "",
        True,
        "5 fortnights",
        "0.0000001s",  # rounds to zero microseconds
        1e-7,
        timedelta(0),
        "36501d",
        "99999999999d",  # past what timedelta can hold
        1e300,
        10**400,  # past what a float can hold
        float("inf"),
        float("nan"),
    ],
)
def test_bad_durations_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[sweep\ninterval = 1", "not valid TOML"),  # truncated table header
        ('[[sources]]\nname = "a"\nkind = "n8n"\n', "sources.0.base_url"),  # missing field
        (SOURCE + 'colour = "blue"\n', "sources.0.colour"),  # unknown key
        ('[sweep]\nintervall = "1m"\n', "sweep.intervall"),  # a typo is not ignored
        (SOURCE + SOURCE, "unique"),
        (SOURCE.replace("http://", "ftp://"), "base_url"),
        (SOURCE.replace(":5678", ":99999"), "sources.0.base_url"),  # port out of range
        (SOURCE.replace(":5678", ":0"), "sources.0.base_url"),
        (SOURCE.replace(":5678", ":56a"), "sources.0.base_url"),
        (SOURCE.replace("127.0.0.1:5678", "[::1"), "sources.0.base_url"),  # unclosed bracket
        (SOURCE.replace("127.0.0.1", ""), "sources.0.base_url"),  # no host
        (SOURCE.replace("127.0.0.1", "a\\u0000b"), "sources.0.base_url"),  # a control character
        (SOURCE.replace("5678/", "5678/?a=1"), "sources.0.base_url"),  # paths are appended
        (SOURCE.replace('"n8n"', '"zapier"'), "sources.0.kind"),
        ("[scheduler]\nlease = inf\n", "scheduler.lease"),
        ("[scheduler]\nlease = nan\n", "scheduler.lease"),
        ('[scheduler]\nlease = "0.0000001s"\n', "scheduler.lease"),
        ('[sweep]\ninterval = "99999999999d"\n', "sweep.interval"),
        ("[sweep]\ndispatch_deadline = 1e300\n", "sweep.dispatch_deadline"),
        (SOURCE.replace('"N8N_API_KEY"', '"N8N API KEY; rm -rf /"'), "api_key_env"),
        ("max_attempts = 0\n", "max_attempts"),
        ("[receiver]\nport = 70000\n", "receiver.port"),
        (b"\xff\xfe\x00binary", "cannot read"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_the_key(
    tmp_path: Path, text: str | bytes, where: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(LedgerError) as caught:
        load_config(path)
    message = str(caught.value)
    assert where in message and str(path) in message
    assert "\n" not in message


def test_an_unknown_kind_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match=r"'zapier' \(known: airflow, n8n, prefect\)"):
        load_config(write(tmp_path, SOURCE.replace('"n8n"', '"zapier"')))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_registered_kind_is_accepted(tmp_path: Path, kind: str) -> None:
    cfg = load_config(write(tmp_path, SOURCE.replace('"n8n"', f'"{kind}"')))
    assert [src.model_dump() for src in cfg.sources] == [
        {
            "name": "prod-n8n",
            "kind": kind,
            "base_url": "http://127.0.0.1:5678",
            "api_key_env": "N8N_API_KEY",
            "username_env": None,
            "password_env": None,
            "interval": timedelta(seconds=90),
            "page_size": 250,
            "custom_data_workflows": [],
            "custom_data_key": "ledger.operation_id",
            "reconcile_interval": timedelta(hours=1),
            "connect_timeout": timedelta(seconds=5),
            "timeout": timedelta(seconds=30),
            "pin_evidence": True,
            "version_reads": 100,
            "pin_tag_id": None,
        }
    ]


def test_the_config_module_loads_no_connector_until_a_source_is_read() -> None:
    code = (
        "import sys, flowledger.config; "
        "print(any(m.split('.')[0] in ('connectors', 'httpx') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_api_key_itself_never_enters_the_config(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="api_key"):
        load_config(write(tmp_path, SOURCE.replace("api_key_env", "api_key")))


def test_config_pointed_at_a_missing_file_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(LedgerError, match="not a file"):
        load_config()


def test_hold_deadlines_are_read_from_the_sweep_section(tmp_path: Path) -> None:
    text = '[sweep]\nblocking_hold_deadline = "10m"\nhold_deadline = "1d"\n'
    deadlines = load_config(write(tmp_path, text)).sweep.hold_deadlines
    assert (deadlines.blocking, deadlines.other) == (timedelta(minutes=10), timedelta(days=1))
    assert FileConfig().sweep.hold_deadlines == domain.HoldDeadlines()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            '[[sources]]\nname = "a"\nkind = "n8n"\nbaseurl = "http://127.0.0.1:5678/"\n',
            "sources.0.baseurl: unknown key; did you mean 'base_url'?",
        ),
        ('[sweep]\nintervall = "1m"\n', "sweep.intervall: unknown key; did you mean 'interval'?"),
        ("max_attempt = 3\n", "max_attempt: unknown key; did you mean 'max_attempts'?"),
        ('[receiver]\ncolour = "blue"\n', "receiver.colour: unknown key; this section takes"),
    ],
)
def test_an_unknown_key_is_named_with_the_key_it_was_likely_meant_to_be(
    tmp_path: Path, text: str, said: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(LedgerError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: {said}")


def test_trusted_proxies_are_addresses_or_networks_as_uvicorn_reads_them(tmp_path: Path) -> None:
    path = write(tmp_path, '[receiver]\ntrusted_proxies = [" 10.0.0.5", "172.18.0.1/16", "::1"]\n')
    assert load_config(path).receiver.trusted_proxies == ["10.0.0.5", "172.18.0.0/16", "::1"]
    path = write(tmp_path, '[receiver]\ntrusted_proxies = ["proxy.example"]\n')
    with pytest.raises(LedgerError, match=r"receiver\.trusted_proxies.*not an IP address"):
        load_config(path)
