"""interaction tasks: an unguessable task id for an interact.ask run as an MCP task

An interaction is keyed by its tool_call_id, which the caller chooses; the task id that names it
to MCP clients is a random UUID of its own. A new table only (expand-only).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 16:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "interaction_tasks",
        sa.Column("task_id", sa.UUID(), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["tool_call_id"],
            ["interactions.tool_call_id"],
            name=op.f("fk_interaction_tasks_tool_call_id_interactions"),
        ),
        sa.PrimaryKeyConstraint("task_id", name=op.f("pk_interaction_tasks")),
        sa.UniqueConstraint("tool_call_id", name=op.f("uq_interaction_tasks_tool_call_id")),
    )


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
