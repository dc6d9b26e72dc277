"""host sessions: a person's scoped, revocable session, minted by the Host backend

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 03:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A session reaches the conversations it names; NULL names none in particular: every
    # conversation (a sign-in with HOST_TOKEN itself, where a deployment allows it).
    op.create_table(
        "host_sessions",
        sa.Column("session_id", sa.UUID(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("conversation_ids", postgresql.ARRAY(sa.Text()), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "char_length(subject) BETWEEN 1 AND 255", name=op.f("ck_host_sessions_subject_length")
        ),
        sa.CheckConstraint(
            "conversation_ids IS NULL OR cardinality(conversation_ids) BETWEEN 1 AND 1000",
            name=op.f("ck_host_sessions_conversation_count"),
        ),
        sa.CheckConstraint("expires_at > created_at", name=op.f("ck_host_sessions_expires_after_created")),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_host_sessions")),
    )
    op.create_index("ix_host_sessions_expires_at", "host_sessions", ["expires_at"], unique=False)


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
