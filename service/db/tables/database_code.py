"""The database code applied from service/db/sql/."""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    Table,
    Text,
)

from service.db.tables.conventions import (
    metadata,
    timestamp,
)

# The database code applied from service/db/sql/ (service.db.code): one row per function, type,
# trigger and view, with the checksum of the text that made it, so `migrate` touches only what changed.
database_code = Table(
    "database_code",
    metadata,
    Column("kind", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("checksum", Text, nullable=False),
    timestamp("applied_at", default=True),
    CheckConstraint("kind IN ('type', 'function', 'trigger', 'view')", name="kind"),
)
