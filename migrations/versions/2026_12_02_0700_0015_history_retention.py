"""history retention: its report row, and the indexes its bounded batches walk

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 07:00:00+00:00

Expand-only. A new table (the last round's report), then five indexes built CONCURRENTLY (outside a
transaction), so that writers of ``tool_calls``, ``outbox``, ``workspaces`` and ``interactions`` —
tool calls and relays of either release — never wait for them however large the tables are. A
build that failed half-way leaves an invalid index behind; it is dropped and built again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = {
    "ix_tool_calls_answer_kept": "ON tool_calls (created_at) WHERE status_code <> 410",
    "ix_outbox_operation": "ON outbox (operation_id) WHERE operation_id IS NOT NULL",
    "ix_workspaces_foreground": (
        "ON workspaces (foreground_instance_id) WHERE foreground_instance_id IS NOT NULL"
    ),
    "ix_interactions_created_at": "ON interactions (created_at)",
    "ix_interactions_sub_session": (
        "ON interactions (asked_in_sub_session_id) WHERE asked_in_sub_session_id IS NOT NULL"
    ),
}

INVALID = """
SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname = '{name}' AND NOT i.indisvalid
"""


def upgrade() -> None:
    op.create_table(
        "history_retention",
        sa.Column("id", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("retention_days", sa.Integer(), nullable=False),
        sa.Column("reported_by", sa.Text(), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("last_pruned_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "last_pruned",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("total_pruned", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.CheckConstraint("id", name=op.f("ck_history_retention_one_row")),
        sa.CheckConstraint("retention_days >= 1", name=op.f("ck_history_retention_retention_days_positive")),
        sa.CheckConstraint(
            "jsonb_typeof(last_pruned) = 'object'", name=op.f("ck_history_retention_last_pruned_object")
        ),
        sa.CheckConstraint("total_pruned >= 0", name=op.f("ck_history_retention_total_pruned_nonnegative")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_history_retention")),
    )
    with op.get_context().autocommit_block():
        connection = op.get_bind()
        for name, definition in INDEXES.items():
            if connection.exec_driver_sql(INVALID.format(name=name)).first() is not None:
                op.execute(f"DROP INDEX CONCURRENTLY {name}")
            op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {definition}")


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
