"""tool calls by time: a BRIN index on tool_calls.created_at for the operators' list of recent calls

Rows arrive in time order, so a BRIN index finds the last hour's calls for a few pages of summary
and costs next to nothing per insert (a B-tree would add a write to every tool call). Built
CONCURRENTLY: writes go on while it builds (expand-only).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 18:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.create_index(
            "ix_tool_calls_created_at",
            "tool_calls",
            ["created_at"],
            postgresql_using="brin",
            postgresql_concurrently=True,
            if_not_exists=True,
        )


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
