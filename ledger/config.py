"""Settings from the environment (``FLOWLEDGER_*``); secrets stay there and are never written
to the database, logs or events."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from ledger import domain


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FLOWLEDGER_", extra="ignore")

    db: str | None = Field(default=None, description="SQLite path or SQLAlchemy URL")
    secret: SecretStr | None = Field(
        default=None, description="key for HMAC input hashes (recommended)"
    )
    max_attempts: int = Field(default=domain.DEFAULT_MAX_ATTEMPTS, ge=1, le=1000)
    dispatch_deadline_seconds: int = Field(
        default=int(domain.DEFAULT_DISPATCH_DEADLINE.total_seconds()), ge=1, le=30 * 86400
    )

    def secret_bytes(self) -> bytes | None:
        return self.secret.get_secret_value().encode() if self.secret else None
