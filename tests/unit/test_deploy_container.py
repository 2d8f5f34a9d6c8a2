"""The image (Containerfile, deploy/container/) and deploy/compose.yaml, read without building
or running anything (``make image-test`` does that): the image's stages are on ``BASE``, it
runs as a user of its own with its health checked; its entrypoint's and its default command's
lines are ones the CLI takes; the build context holds what the Containerfile copies; the
compose file's services reach each other by the names and databases the others give, and
``.env.example`` sets every variable it reads."""

from __future__ import annotations

import fnmatch
import http.server
import importlib.util
import re
import shlex
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer
import yaml

from e2e.local_n8n import N8N_VERSION
from flowledger.cli import app
from flowledger.config import load_config

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "Containerfile"
ENTRYPOINT = ROOT / "deploy" / "container" / "entrypoint.sh"
HEALTHCHECK = ROOT / "deploy" / "container" / "healthcheck.py"
COMPOSE = ROOT / "deploy" / "compose.yaml"
INIT_DATABASES = ROOT / "deploy" / "compose" / "init-databases.sh"
NODE_PACKAGE = ROOT / "integrations" / "n8n" / "package.json"


def instructions(text: str) -> list[tuple[str, str]]:
    """The Containerfile's instructions, continuation lines joined, comments left out."""
    joined = re.sub(r"\\\n", " ", text)
    found = []
    for line in joined.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def final_stage() -> list[tuple[str, str]]:
    steps = instructions(CONTAINERFILE.read_text(encoding="utf-8"))
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last_from:]


def one(keyword: str) -> str:
    (value,) = [rest for k, rest in final_stage() if k == keyword]
    return value


def test_every_stage_is_on_the_base_argument_an_official_slim_python_by_default() -> None:
    steps = instructions(CONTAINERFILE.read_text(encoding="utf-8"))
    assert steps[0][0] == "ARG"
    name, _, default = steps[0][1].partition("=")
    assert name == "BASE"
    assert re.fullmatch(r"docker\.io/library/python:3\.\d+-slim(-\w+)?", default)
    stages = [rest.split()[0] for keyword, rest in steps if keyword == "FROM"]
    assert len(stages) == 2 and set(stages) == {"${BASE}"}


def test_it_runs_as_a_user_of_its_own_with_the_ledger_in_its_data_volume() -> None:
    user = one("USER").split(":")[0]
    assert user not in ("", "root", "0")
    assert one("VOLUME") == "/data"
    env = dict(pair.split("=", 1) for pair in shlex.split(one("ENV")))
    assert env["FLOWLEDGER_DB"].startswith("/data/")


def copied(destination: str) -> str:
    """The source the final stage copies to ``destination``."""
    sources = [
        rest.split()[-2]
        for keyword, rest in final_stage()
        if keyword == "COPY" and rest.split()[-1] == destination
    ]
    assert sources, f"nothing is copied to {destination}"
    return sources[0]


def test_the_health_check_and_the_entrypoint_are_the_files_copied_in() -> None:
    healthcheck = one("HEALTHCHECK")
    command = yaml.safe_load(healthcheck.partition("CMD ")[2])  # its JSON form
    assert ROOT / copied(command[-1]) == HEALTHCHECK
    assert "--interval" in healthcheck
    (entrypoint,) = yaml.safe_load(one("ENTRYPOINT"))
    assert ROOT / copied(entrypoint) == ENTRYPOINT
    assert ENTRYPOINT.stat().st_mode & 0o111, "the entrypoint must be executable"


def _parse(argv: list[str]) -> dict[str, Any]:
    """``flowledger ARGV`` parsed by the CLI's own command; its parameters."""
    command = typer.main.get_group(app).commands.get(argv[0])
    assert command is not None, f"flowledger has no command {argv[0]!r}"
    return dict(command.make_context(argv[0], argv[1:], resilient_parsing=False).params)


def test_the_entrypoint_prepares_the_ledger_with_the_cli_and_then_becomes_the_command() -> None:
    lines = [
        shlex.split(line)
        for line in ENTRYPOINT.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith(("#", "set "))
    ]
    assert [line[:2] for line in lines[:2]] == [["flowledger", "init"], ["flowledger", "migrate"]]
    for line in lines[:2]:
        _parse(line[1:])
    assert lines[-1] == ["exec", "flowledger", "$@"]  # exec: SIGTERM reaches flowledger
    default = yaml.safe_load(one("CMD"))
    assert _parse(default)["host"] == "0.0.0.0"


def test_the_build_context_holds_what_the_containerfile_copies() -> None:
    patterns = [
        line
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def kept(path: str) -> bool:
        """The last pattern that matches the path or a folder above it decides."""
        parts = path.split("/")
        prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        keep = True
        for pattern in patterns:
            if any(fnmatch.fnmatch(p, pattern.lstrip("!")) for p in prefixes):
                keep = pattern.startswith("!")
        return keep

    steps = instructions(CONTAINERFILE.read_text(encoding="utf-8"))
    sources = [
        source
        for keyword, rest in steps
        if keyword == "COPY" and not rest.startswith("--from")
        for source in rest.split()[:-1]
    ]
    assert sources and all(kept(s) and (ROOT / s).exists() for s in sources), sources
    assert not kept(".git") and not kept("integrations")


# --- the health check ------------------------------------------------------------------------


@pytest.fixture
def healthcheck() -> Any:
    spec = importlib.util.spec_from_file_location("healthcheck", HEALTHCHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Healthz(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), Healthz)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_the_health_check_asks_healthz_on_the_port_the_settings_give(
    healthcheck: Any, receiver: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tmp_path / "flowledger.toml"
    settings.write_text(f"[receiver]\nport = {receiver}\n", encoding="utf-8")
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(settings))
    assert healthcheck.main() == 0
    settings.write_text(f"[receiver]\nport = {receiver + 1 if receiver < 65535 else 1}\n")
    assert healthcheck.main() == 1


# --- compose ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The compose file as the engine reads it: each ``${VAR...}`` replaced by a value."""
    text = re.sub(r"\$\{(\w+)[^}]*\}", r"\1-value", COMPOSE.read_text(encoding="utf-8"))
    return dict(yaml.safe_load(text))


def service(compose: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(compose["services"][name])


def created_databases() -> dict[str, str]:
    """Each database the init script creates, with its owner."""
    text = INIT_DATABASES.read_text(encoding="utf-8")
    return dict(re.findall(r"CREATE DATABASE (\w+) OWNER (\w+);", text))


def test_env_example_sets_every_variable_the_compose_file_reads() -> None:
    used = set(re.findall(r"\$\{(\w+)", COMPOSE.read_text(encoding="utf-8")))
    example = (ROOT / "deploy" / ".env.example").read_text(encoding="utf-8")
    given = set(re.findall(r"^(\w+)=", example, re.MULTILINE))
    assert used and used <= given, f"not in .env.example: {sorted(used - given)}"
    assert "/deploy/.env" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()


def test_each_mounted_file_is_in_the_checkout(compose: dict[str, Any]) -> None:
    for name, spec in compose["services"].items():
        for volume in spec.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                if source.endswith("/dist"):  # built by make n8n-node
                    continue
                assert (COMPOSE.parent / source).exists(), f"{name}: {source}"


def test_n8n_and_the_ledger_use_the_databases_and_roles_the_init_script_makes(
    compose: dict[str, Any],
) -> None:
    postgres = service(compose, "postgres")
    assert any(
        v.endswith(":/docker-entrypoint-initdb.d/init-databases.sh:ro") for v in postgres["volumes"]
    )
    databases = created_databases()
    n8n = service(compose, "n8n")["environment"]
    assert n8n["DB_TYPE"] == "postgresdb" and n8n["DB_POSTGRESDB_HOST"] == "postgres"
    assert databases[n8n["DB_POSTGRESDB_DATABASE"]] == n8n["DB_POSTGRESDB_USER"]
    ledger = urlsplit(service(compose, "ledger")["environment"]["FLOWLEDGER_DB"])
    assert (ledger.scheme, ledger.hostname, ledger.port) == ("postgresql", "postgres", 5432)
    assert databases[ledger.path.lstrip("/")] == ledger.username
    assert set(databases) == {"n8n", ledger.path.lstrip("/")}
    # Every password the script reads is given to it.
    read = set(re.findall(r'"\$(\w+)"', INIT_DATABASES.read_text(encoding="utf-8")))
    assert read <= set(postgres["environment"])


def test_the_ledger_reaches_n8n_by_its_service_name_with_valid_settings(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = service(compose, "ledger")
    settings = next(v for v in ledger["volumes"] if "flowledger.toml" in v)
    source, target, _ = settings.split(":")
    assert ledger["environment"]["FLOWLEDGER_CONFIG"] == target
    config = load_config(COMPOSE.parent / source)
    (n8n_source,) = config.sources
    assert urlsplit(n8n_source.base_url).hostname == "n8n"
    assert (
        f"{urlsplit(n8n_source.base_url).port}:{urlsplit(n8n_source.base_url).port}"
        in (service(compose, "n8n")["ports"][0])
    )
    assert n8n_source.api_key_env in ledger["environment"]
    assert ledger["build"]["dockerfile"] == "Containerfile"
    assert (COMPOSE.parent / ledger["build"]["context"] / "Containerfile").is_file()


def test_n8n_is_pinned_to_the_tested_version_and_loads_the_node_package(
    compose: dict[str, Any],
) -> None:
    n8n = service(compose, "n8n")
    image, _, tag = n8n["image"].rpartition(":")
    assert image.endswith("n8nio/n8n") and tag == N8N_VERSION and tag.startswith("2.")
    package = yaml.safe_load(NODE_PACKAGE.read_text(encoding="utf-8"))
    # n8n loads every n8n-nodes-* package in <user folder>/.n8n/nodes/node_modules.
    where = f"/home/node/.n8n/nodes/node_modules/{package['name']}"
    mounted = {v.split(":")[1]: v.split(":")[0] for v in n8n["volumes"]}
    assert mounted[f"{where}/package.json"] == "../integrations/n8n/package.json"
    assert mounted[f"{where}/dist"] == "../integrations/n8n/dist"
    listed = package["n8n"]["nodes"] + package["n8n"]["credentials"]
    assert listed and all(path.startswith("dist/") for path in listed)


# The PostgreSQL client each Debian release carries (its postgresql-client package's major).
DEBIAN_POSTGRESQL_CLIENT = {"bookworm": 15, "trixie": 17}


def test_the_compose_server_is_of_the_major_the_images_pg_dump_can_dump(
    compose: dict[str, Any],
) -> None:
    """pg_dump dumps servers of its own major and older: `flowledger backup` in the image, and
    the entrypoint's backup before a migration, need the server no newer than the client."""
    installs = [rest for keyword, rest in final_stage() if keyword == "RUN" and "apt-get" in rest]
    assert any("postgresql-client" in rest.split() for rest in installs)
    base = instructions(CONTAINERFILE.read_text(encoding="utf-8"))[0][1].partition("=")[2]
    client = DEBIAN_POSTGRESQL_CLIENT[base.rsplit("-", 1)[1]]
    tag = service(compose, "postgres")["image"].rpartition(":")[2]
    assert re.fullmatch(r"\d+-\w+", tag), tag  # a major pinned, on a named Debian
    assert int(tag.split("-")[0]) == client
