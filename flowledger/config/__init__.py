"""Configuration: secrets and the database from the environment (``FLOWLEDGER_*``), everything
else from ``flowledger.toml`` (in the working directory, or where ``FLOWLEDGER_CONFIG`` points).

Secrets stay in the environment: a source names the *variable* that holds its API key
(``api_key_env``), never the key, so the file can be committed and nothing secret reaches the
database, logs or events.

The package's face: the durations (:mod:`.durations`), the file's sections (:mod:`.sections`)
and where the settings are read from (:mod:`.files`).
"""

from flowledger.config.durations import MAX_DURATION, Duration, parse_duration
from flowledger.config.files import (
    CONFIG_FILE,
    Settings,
    config_path,
    configured_secrets,
    in_our_words,
    load_config,
)
from flowledger.config.sections import (
    AlertsConfig,
    AnchorsConfig,
    CheckpointsConfig,
    FileConfig,
    LogFormat,
    ReceiverConfig,
    SchedulerConfig,
    SourceConfig,
    SweepConfig,
    WitnessConfig,
)

__all__ = [
    "CONFIG_FILE",
    "MAX_DURATION",
    "AlertsConfig",
    "AnchorsConfig",
    "CheckpointsConfig",
    "Duration",
    "FileConfig",
    "LogFormat",
    "ReceiverConfig",
    "SchedulerConfig",
    "Settings",
    "SourceConfig",
    "SweepConfig",
    "WitnessConfig",
    "config_path",
    "configured_secrets",
    "in_our_words",
    "load_config",
    "parse_duration",
]
