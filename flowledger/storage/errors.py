"""The database driver's errors, for callers above storage that report them."""

from __future__ import annotations

import sqlalchemy as sa

# Any error the database or its driver raised (connection refused, bad credentials…).
DatabaseError = sa.exc.DBAPIError

__all__ = ["DatabaseError"]
