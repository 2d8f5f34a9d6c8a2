"""deploy/systemd/flowledger.service: systemd accepts it (``systemd-analyze verify``, on a copy
whose commands point at an executable that exists here), it carries the hardening it promises,
and its command lines use commands and options the CLI has."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import typer

from flowledger.cli import app

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "flowledger.service"
INSTALLED = "/opt/flowledger/venv/bin/flowledger"
LEDGER = "/var/lib/flowledger/flowledger.db"

# Each directive of [Service], once, with exactly this value.
SERVICE = {
    "User": "flowledger",
    "Group": "flowledger",
    "StateDirectory": "flowledger",
    "StateDirectoryMode": "0700",
    "WorkingDirectory": "/var/lib/flowledger",
    "EnvironmentFile": "-/etc/flowledger/env",
    "Restart": "on-failure",
    "KillSignal": "SIGTERM",
    "TimeoutStopSec": "15",
    "UMask": "0077",
    "NoNewPrivileges": "yes",
    "CapabilityBoundingSet": "",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "ProtectProc": "invisible",
    "PrivateMounts": "yes",
    "RemoveIPC": "yes",
    "ProtectClock": "yes",
    "ProtectHostname": "yes",
    "RestrictRealtime": "yes",
    "RestrictSUIDSGID": "yes",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    "RestrictNamespaces": "yes",
    "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "yes",
    "SystemCallArchitectures": "native",
    "SystemCallErrorNumber": "EPERM",
}


def parse_unit(text: str) -> dict[str, list[tuple[str, str]]]:
    """A unit file as its sections' (key, value) lines in order; a key may repeat, as
    ``Environment=`` does, which is why configparser will not do."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line.startswith(("#", ";")):
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        assert current is not None, f"a line before any section: {line!r}"
        key, sep, value = line.partition("=")
        assert sep, f"not a KEY=value line: {line!r}"
        current.append((key.strip(), value.strip()))
    return sections


def service() -> list[tuple[str, str]]:
    return parse_unit(UNIT.read_text(encoding="utf-8"))["Service"]


def values(key: str) -> list[str]:
    return [value for name, value in service() if name == key]


@pytest.mark.parametrize(("key", "expected"), SERVICE.items(), ids=list(SERVICE))
def test_the_directive_is_set_once_to_its_value(key: str, expected: str) -> None:
    assert values(key) == [expected]


def test_system_calls_are_those_of_a_service_less_the_privileged_ones() -> None:
    assert values("SystemCallFilter") == ["@system-service", "~@privileged @resources"]


def test_a_dedicated_user_not_a_dynamic_one() -> None:
    assert values("DynamicUser") == []
    assert "root" not in values("User")


def test_settings_come_from_etc_and_secrets_only_from_the_environment_file() -> None:
    environment = [pair for value in values("Environment") for pair in shlex.split(value)]
    assert "FLOWLEDGER_CONFIG=/etc/flowledger/flowledger.toml" in environment
    assert not [pair for pair in environment if pair.startswith(("FLOWLEDGER_SECRET=", "N8N_"))]


def test_the_ledger_is_in_the_state_directory() -> None:
    (state,) = values("StateDirectory")
    assert PurePosixPath(LEDGER).parent == PurePosixPath("/var/lib") / state


def test_the_service_is_installed_for_the_multi_user_target() -> None:
    install = parse_unit(UNIT.read_text(encoding="utf-8"))["Install"]
    assert ("WantedBy", "multi-user.target") in install


def _command(name: str) -> Any:
    command = typer.main.get_group(app).commands.get(name)
    assert command is not None, f"flowledger has no command {name!r}"
    return command


@pytest.mark.parametrize(("key", "subcommand"), [("ExecStartPre", "init"), ("ExecStart", "run")])
def test_the_command_line_uses_the_cli_s_own_options(key: str, subcommand: str) -> None:
    (line,) = values(key)
    argv = shlex.split(line)
    assert argv[0] == INSTALLED
    assert argv[1] == subcommand
    command = _command(subcommand)
    options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    given = [arg.partition("=")[0] for arg in argv[2:] if arg.startswith("-")]
    assert given, f"{key} gives no options"
    assert set(given) <= options, f"{key}: {set(given) - options} not options of {subcommand}"
    assert argv[argv.index("--db") + 1] == LEDGER
    # And the CLI parses the whole line: its arguments, not only its option names.
    context = command.make_context(subcommand, argv[2:], resilient_parsing=False)
    assert context.params["db"] == LEDGER


def _verify(unit: Path) -> subprocess.CompletedProcess[str]:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    return subprocess.run(
        [analyze, "verify", "--man=no", "--generators=no", str(unit)],
        capture_output=True,
        text=True,
        check=False,
    )


def _copy(tmp_path: Path, *replace: tuple[str, str]) -> Path:
    """The unit with its commands pointing at this Python, an executable that exists here
    (verify refuses a command it cannot find), and any other ``replace`` made."""
    text = UNIT.read_text(encoding="utf-8")
    assert INSTALLED in text
    text = text.replace(INSTALLED, sys.executable)
    for old, new in replace:
        assert old in text
        text = text.replace(old, new)
    copy = tmp_path / UNIT.name
    copy.write_text(text, encoding="utf-8")
    return copy


def _about(unit: Path, result: subprocess.CompletedProcess[str]) -> list[str]:
    """What verify said about this unit (it may say things about others on the machine)."""
    return [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if str(unit) in line or unit.name in line
    ]


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    result = _verify(copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _about(copy, result) == []


def test_verify_would_name_a_directive_it_does_not_know(tmp_path: Path) -> None:
    """The check above is not blind: a misspelt directive is only a warning (exit status 0),
    which the check finds in its output."""
    copy = _copy(tmp_path, ("ProtectHome=yes", "ProtectHom=yes"))
    result = _verify(copy)
    assert any("ProtectHom" in line for line in _about(copy, result)), result.stderr
