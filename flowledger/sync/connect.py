"""From a configured source to a connector: secrets read from the environment, an HTTP
client, and messages scrubbed of any secret before they are stored or printed."""

from __future__ import annotations

import httpx

from flowledger.config import SourceConfig
from flowledger.connectors import registry
from flowledger.connectors.base import Connector, ConnectorError, Settings
from flowledger.domain.redact import redact, secrets_of


class ConfigProblem(ConnectorError):
    """The source cannot run as configured (a missing environment variable, an unknown kind)."""

    stops_source = True


def connector_settings(cfg: SourceConfig) -> Settings:
    """The connector's view of a source, secrets read from the environment now."""
    for env_name in (cfg.api_key_env, cfg.username_env, cfg.password_env):
        if env_name and cfg.secret(env_name) is None:
            raise ConfigProblem(
                f"environment variable {env_name} (named by source {cfg.name}) is not set"
            )
    kind = registry.KINDS.get(cfg.kind)  # an unknown one is refused when it is built
    if kind is not None and kind.needs_api_key and not cfg.api_key_env:
        raise ConfigProblem(f"source {cfg.name} has no api_key_env naming its {kind.title} API key")
    return Settings(
        base_url=cfg.base_url,
        api_key=cfg.secret(cfg.api_key_env),
        username=cfg.secret(cfg.username_env),
        password=cfg.secret(cfg.password_env),
        page_size=cfg.page_size,
        custom_data_workflows=tuple(cfg.custom_data_workflows),
        custom_data_key=cfg.custom_data_key,
    )


def make_client(cfg: SourceConfig) -> httpx.Client:
    """The HTTP client for one source, with its connect and answer timeouts."""
    return httpx.Client(
        timeout=httpx.Timeout(
            cfg.timeout.total_seconds(), connect=cfg.connect_timeout.total_seconds()
        ),
        headers={"User-Agent": "flowledger-sync"},
        follow_redirects=False,
    )


def build_connector(cfg: SourceConfig, client: httpx.Client) -> Connector:
    settings = connector_settings(cfg)
    try:
        return registry.build(cfg.kind, client, settings)
    except ValueError as exc:
        raise ConfigProblem(str(exc)) from exc


def check_source(cfg: SourceConfig, client: httpx.Client | None = None) -> str:
    """One live call; returns what answered or raises a :class:`ConnectorError`."""
    own = client is None
    client = client or make_client(cfg)
    try:
        return scrub(build_connector(cfg, client).check(), cfg)
    except ConnectorError as exc:
        raise type(exc)(scrub(str(exc), cfg)) from None
    finally:
        if own:
            client.close()


def scrub(message: str, cfg: SourceConfig) -> str:
    """Belt and braces: no secret of the source, whole or a piece of it in any case, and no
    credential pattern survives into a printed message (:func:`flowledger.domain.redact.redact`;
    what is stored is redacted again with every configured secret)."""
    return redact(message, secrets_of(cfg.secrets()))
