"""revocable console sessions, and capabilities that end with the person's session that minted them

console_sessions: the operator console's sign-ins, so that signing out (or an expiry) ends one on
every replica. capabilities.host_session_id: the person's session a capability was minted under
(NULL: minted with HOST_TOKEN itself), so that it ends with that session; deleting a session row
(pruned a day after it ended) deletes its capabilities. New table, new nullable column, an index
built concurrently (expand-only).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 20:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("session_id", sa.UUID(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("expires_at > created_at", name=op.f("ck_console_sessions_expires_after_created")),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_console_sessions")),
    )
    op.create_index("ix_console_sessions_expires_at", "console_sessions", ["expires_at"], unique=False)
    op.add_column("capabilities", sa.Column("host_session_id", sa.UUID(), nullable=True))
    op.create_foreign_key(
        op.f("fk_capabilities_host_session_id_host_sessions"),
        "capabilities",
        "host_sessions",
        ["host_session_id"],
        ["session_id"],
        ondelete="CASCADE",
    )
    with op.get_context().autocommit_block():
        op.create_index(
            "ix_capabilities_host_session_id",
            "capabilities",
            ["host_session_id"],
            postgresql_where=sa.text("host_session_id IS NOT NULL"),
            postgresql_concurrently=True,
            if_not_exists=True,
        )


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
