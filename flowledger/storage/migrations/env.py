"""Alembic environment: runs on the connection that ``flowledger.storage.migrate`` hands it."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

# Each registers its tables on SQLModel.metadata.
import flowledger.storage.acting_models
import flowledger.storage.models
import flowledger.storage.version_tables
import flowledger.storage.witness_tables  # noqa: F401

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
