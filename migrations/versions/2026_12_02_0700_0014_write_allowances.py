"""write limits: one counter row per (principal, kind) for the current window

write_allowances: how much a conversation or a person's session wrote in the current fixed window,
per kind of write (messages, surface events, instance opens), counted by spend_write in the
transaction of each write. A new table (expand-only): the previous release never reads it.

Revision ID: 0014
Revises: 0012
Create Date: 2026-12-02 07:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "write_allowances",
        sa.Column("principal", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("writes", sa.Integer(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "writes >= 0 AND bytes >= 0", name=op.f("ck_write_allowances_counts_not_negative")
        ),
        sa.PrimaryKeyConstraint("principal", "kind", name=op.f("pk_write_allowances")),
    )


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
