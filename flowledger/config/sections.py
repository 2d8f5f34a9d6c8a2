"""The sections of ``flowledger.toml``, one model each, and the file as a whole
(:class:`FileConfig`): what each accepts, its bounds and its defaults."""

from __future__ import annotations

import ipaddress
import os
from datetime import timedelta
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from flowledger import domain
from flowledger.config.durations import Duration
from flowledger.domain.twins import DEFAULT_TWIN_WINDOW
from flowledger.storage.problems import Missing

# How ``serve`` and ``run`` write a log record: one line of text, or one JSON object a line.
LogFormat = Literal["plain", "json"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceConfig(_Section):
    """One workflow-tool instance to sync from."""

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")
    kind: str = Field(min_length=1, max_length=40)
    base_url: str = Field(min_length=1, max_length=1000)
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    username_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    password_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    interval: Duration = timedelta(seconds=60)
    page_size: int = Field(default=250, ge=1, le=1000)
    # Workflows whose executions are read with their data to find customData links.
    custom_data_workflows: list[str] = Field(default_factory=list)
    custom_data_key: str = "ledger.operation_id"
    # How often a sync walks the tool's whole list to notice pruned and deleted executions.
    reconcile_interval: Duration = timedelta(hours=1)
    # How long to wait for the tool to accept a connection, and for each answer once connected.
    connect_timeout: Duration = timedelta(seconds=5)
    timeout: Duration = timedelta(seconds=30)
    # n8n: keep the execution a hold is about from n8n's pruning while the hold is open.
    pin_evidence: bool = True
    # n8n: executions that dispatched an operation asked for by id, at most this many a sync
    # run, for the workflow version they ran (a stale_workflow_version hold); the rest wait
    # for the next run, oldest first. 0 turns the check off.
    version_reads: int = Field(default=100, ge=0, le=10_000)
    # n8n: the id of an annotation tag (made in n8n's UI) the pin carries; none by default.
    pin_tag_id: str | None = Field(
        default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$"
    )

    @field_validator("connect_timeout", "timeout")
    @classmethod
    def _short_enough(cls, value: timedelta) -> timedelta:
        if value > timedelta(minutes=10):
            raise ValueError("at most 10m: a longer wait holds a sync job for nothing")
        return value

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        # Imported here: the registry loads every connector and httpx, which importing the
        # configuration alone does not need.
        from flowledger.connectors import registry

        registry.get(value)  # a ValueError naming the known kinds
        return value

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        # The messages never repeat the URL: it may carry a user and password (urlsplit's own
        # messages name at most the host).
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        if any(ch.isspace() or not ch.isprintable() for ch in value):
            raise ValueError("base_url must not contain spaces or control characters")
        try:
            parts = urlsplit(value)
        except ValueError as exc:
            raise ValueError(f"base_url is not a valid URL ({exc})") from None
        if not parts.hostname:
            raise ValueError("base_url names no host")
        try:
            bad_port = parts.port == 0
        except ValueError:  # not a number, or past 65535
            bad_port = True
        if bad_port:
            raise ValueError("base_url's port must be a number from 1 to 65535")
        if "?" in value or "#" in value:
            raise ValueError("base_url must not have a query or fragment (paths are appended)")
        return value.rstrip("/")

    def secret(self, env_name: str | None) -> str | None:
        return os.environ.get(env_name) if env_name else None

    def secrets(self) -> list[str]:
        """This source's secret values, for redaction: the API key and the password (a user
        name is not a secret, and redacting it would blank every text that names it)."""
        return [v for v in (self.secret(self.api_key_env), self.secret(self.password_env)) if v]


class SweepConfig(_Section):
    """Thresholds of the sweep; an operation's own deadline wins over ``dispatch_deadline``."""

    interval: Duration = timedelta(minutes=1)
    dispatch_deadline: Duration = domain.DEFAULT_DISPATCH_DEADLINE
    stale_prepared_after: Duration = timedelta(hours=24)
    execution_stuck_after: Duration = timedelta(hours=2)
    source_stale_intervals: int = Field(default=5, ge=1, le=10_000)
    # How long a person has to act on a new hold before it is overdue (and alerted again).
    blocking_hold_deadline: Duration = domain.DEFAULT_BLOCKING_HOLD_DEADLINE
    hold_deadline: Duration = domain.DEFAULT_HOLD_DEADLINE

    @property
    def hold_deadlines(self) -> domain.HoldDeadlines:
        return domain.HoldDeadlines(self.blocking_hold_deadline, self.hold_deadline)


class AlertsConfig(_Section):
    """Where new and overdue holds are posted (an n8n Webhook trigger, a chat bridge...)."""

    urls: list[str] = Field(default_factory=list)
    timeout: Duration = timedelta(seconds=10)
    max_backoff: Duration = timedelta(minutes=30)

    @field_validator("urls")
    @classmethod
    def _http_urls(cls, value: list[str]) -> list[str]:
        # The message never repeats the URL: a webhook URL often carries a secret.
        for n, url in enumerate(value):
            if not url.startswith(("http://", "https://")) or len(url) > 2000:
                raise ValueError(f"alert URL #{n + 1} must be an http:// or https:// URL")
        if len(set(value)) != len(value):
            raise ValueError("alert URLs must be distinct")
        return value

    def secrets(self) -> list[str]:
        """What in the alert URLs is a secret, for redaction: a URL's password, its query
        values of 8 characters or more, and its path segments of 16 or more with a digit (a
        webhook's id, a chat bridge's token). Not the whole URL: pieces of it such as
        ``https://`` or the host name would be redacted from every text."""
        found: list[str] = []
        for url in self.urls:
            parts = urlsplit(url)
            if parts.password:
                found.append(unquote(parts.password))
            found.extend(v for _, v in parse_qsl(parts.query) if len(v) >= 8)
            found.extend(
                segment
                for segment in map(unquote, parts.path.split("/"))
                if len(segment) >= 16 and any(c.isdigit() for c in segment)
            )
        return found


def _file_path(value: Path | None, what: str) -> Path | None:
    """A setting that names a file: not empty, not a directory, ``~`` expanded."""
    if value is not None and (not str(value).strip() or value.is_dir()):
        raise ValueError(f"{what} must name a file, not a directory")
    return value.expanduser() if value is not None else None


class AnchorsConfig(_Section):
    """Where ``flowledger run`` publishes the chain head (``verify --anchors`` checks them):
    an append-only file outside the database's directory, and/or the alert URLs."""

    file: Path | None = None
    interval: Duration = timedelta(minutes=15)
    alerts: bool = False  # also post each new head to [alerts] urls

    @field_validator("file")
    @classmethod
    def _a_file(cls, value: Path | None) -> Path | None:
        return _file_path(value, "anchors file")

    @property
    def enabled(self) -> bool:
        return self.file is not None or self.alerts


class CheckpointsConfig(_Section):
    """The Ed25519 key that signs checkpoints (``flowledger key create`` makes one): with it,
    ``flowledger checkpoint`` and ``proof`` sign, the API serves ``/v1/checkpoint``, and the
    anchors job publishes signed checkpoints with the heads."""

    key: Path | None = None
    # How often `flowledger run` signs a checkpoint and sends it to the [[witnesses]] (when
    # the tree has grown since the last one they cosigned).
    witness_interval: Duration = timedelta(minutes=5)

    @field_validator("key")
    @classmethod
    def _a_key_file(cls, value: Path | None) -> Path | None:
        return _file_path(value, "checkpoints key")


class WitnessConfig(_Section):
    """A witness (C2SP tlog-witness, e.g. `flowledger witness serve` run by another team) that
    cosigns each new checkpoint: its submission URL prefix and its vkey (type 0x04)."""

    url: str = Field(max_length=2000)
    vkey: str = Field(max_length=400)
    timeout: Duration = Field(default=timedelta(seconds=10), le=timedelta(minutes=5))

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("a witness url must be an http:// or https:// URL")
        return value.rstrip("/")

    @field_validator("vkey")
    @classmethod
    def _a_vkey(cls, value: str) -> str:
        from flowledger.domain.checkpoints import COSIGNATURE_V1, parse_verifier_key

        return parse_verifier_key(value, COSIGNATURE_V1).text()


class SchedulerConfig(_Section):
    """How ``flowledger run`` paces its own jobs; the lease decides which process runs them."""

    lease: Duration = timedelta(seconds=30)
    alerts_interval: Duration = timedelta(seconds=10)
    # How often the pins and retries queued for n8n are tried (flowledger act --once).
    acting_interval: Duration = timedelta(seconds=10)
    housekeeping_interval: Duration = timedelta(hours=1)


class ReceiverConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=1, le=65535)
    body_limit: int = Field(default=256 * 1024, ge=1024, le=64 * 1024 * 1024)
    # A request's body must arrive whole within this time of the receiver asking for it,
    # or the answer is 408 and the connection is closed (a slow body holds nothing for long).
    body_timeout: Duration = Field(default=timedelta(seconds=10), le=timedelta(minutes=10))
    # uvicorn's own limits, set here rather than left to its defaults: connections at once
    # (beyond it a request is answered 503 at once) and how long an idle keep-alive
    # connection is kept.
    max_connections: int = Field(default=1000, ge=1, le=100_000)
    # Of those, what one client address may hold at once (connections, and requests in
    # flight); beyond it the client is refused at once, so one client cannot take them all.
    max_connections_per_client: int = Field(default=100, ge=1, le=100_000)
    # The reverse proxies whose X-Forwarded-For names the client (addresses or networks);
    # uvicorn's own default, loopback, so a proxy on the same machine works as it is.
    trusted_proxies: list[str] = Field(default_factory=lambda: ["127.0.0.1", "::1"])
    keep_alive: Duration = Field(default=timedelta(seconds=5), le=timedelta(minutes=10))
    idempotency_ttl: Duration = timedelta(hours=24)
    # How long a workflow call waits for its write: past it, the answer is 503 with
    # Retry-After (the write may still happen; the call's retry finds out). Below the n8n
    # node's 10 s timeout, so that the node is told to retry rather than left to time out.
    write_deadline: Duration = Field(default=timedelta(seconds=5), le=timedelta(minutes=10))
    # How long a read the receiver needs before it can answer waits for the database: the
    # check of /readyz (then 503 not_ready; keep it below a load balancer's probe timeout),
    # the GET routes' reads (then 503) and the refresh of the token list (then a known token
    # goes on with the list it has).
    read_deadline: Duration = Field(default=timedelta(seconds=2), le=timedelta(minutes=10))
    signature_window: Duration = timedelta(minutes=5)
    # Two executions of one workflow dispatching the same operation this close together are
    # a twin trigger (a ``duplicate_trigger`` hold); zero turns the check off.
    twin_window: Duration = Field(default=DEFAULT_TWIN_WINDOW, le=timedelta(hours=1))
    # TLS served by uvicorn itself (PEM files: the certificate with its chain, and its
    # unencrypted key), rather than by a proxy in front; both or neither.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    log_format: LogFormat = "plain"

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        try:
            networks = [ipaddress.ip_network(v.strip(), strict=False) for v in value]
        except ValueError as exc:
            raise ValueError(f"not an IP address or network: {exc}") from None
        return [str(n.network_address if n.num_addresses == 1 else n) for n in networks]

    @field_validator("tls_cert", "tls_key")
    @classmethod
    def _a_tls_file(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return _file_path(value, str(info.field_name))


class FileConfig(_Section):
    """What ``flowledger.toml`` may hold; unknown keys are errors, not silently ignored."""

    sources: list[SourceConfig] = Field(default_factory=list)
    sweep: SweepConfig = SweepConfig()
    alerts: AlertsConfig = AlertsConfig()
    receiver: ReceiverConfig = ReceiverConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    anchors: AnchorsConfig = AnchorsConfig()
    checkpoints: CheckpointsConfig = CheckpointsConfig()
    witnesses: list[WitnessConfig] = Field(default_factory=list)
    max_attempts: int = Field(default=domain.DEFAULT_MAX_ATTEMPTS, ge=1, le=1000)

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, value: list[SourceConfig]) -> list[SourceConfig]:
        names = [s.name for s in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique: {', '.join(dupes)}")
        return value

    @field_validator("witnesses")
    @classmethod
    def _distinct_witnesses(cls, value: list[WitnessConfig]) -> list[WitnessConfig]:
        keys = [w.vkey for w in value]
        if len(set(keys)) != len(keys):
            raise ValueError("each witness's vkey must be given once")
        return value

    def source(self, name: str) -> SourceConfig:
        for s in self.sources:
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.sources) or "none configured"
        raise Missing(f"no source named {name!r} in the configuration ({known})")
