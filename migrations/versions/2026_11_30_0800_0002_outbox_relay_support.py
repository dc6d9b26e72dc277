"""outbox relay support: the head-of-line index

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 08:00:00+00:00

Its wake-up trigger is gone (no NOTIFY inside a deciding transaction) and its operator view,
outbox_overview, lives in service/db/sql/, applied by `migrate`.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_outbox_pending_conversation_sequence",
        "outbox",
        ["conversation_id", "sequence"],
        postgresql_where="status = 'pending'",
    )


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
