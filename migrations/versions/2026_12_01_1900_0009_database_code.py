"""database code from its one source: the checksum of each applied definition

From this revision on, every SQL function, trigger, type and view comes from the ``.sql`` files in
``service/db/sql/``: ``migrate`` applies them after the table migrations (``service.db.code``), and
this table keeps the checksum of what each was made from, so only what changed is touched.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 19:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "database_code",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("checksum", sa.Text(), nullable=False),
        sa.Column("applied_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "kind IN ('type', 'function', 'trigger', 'view')", name=op.f("ck_database_code_kind")
        ),
        sa.PrimaryKeyConstraint("kind", "name", name=op.f("pk_database_code")),
    )


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
