"""workspace lifecycle

Revision ID: 0004
Revises: 0002
Create Date: 2026-11-30 08:05:00+00:00

Its guard and projection triggers live in service/db/sql/, applied by `migrate`.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "projection_events",
        sa.Column("event_seq", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "kind IN ('operation', 'workspace', 'message', 'interaction')",
            name=op.f("ck_projection_events_kind"),
        ),
        sa.PrimaryKeyConstraint("event_seq", name=op.f("pk_projection_events")),
    )
    op.create_index(
        "ix_projection_events_conversation_seq",
        "projection_events",
        ["conversation_id", "event_seq"],
        unique=False,
    )
    op.create_table(
        "capabilities",
        sa.Column("token_hash", sa.LargeBinary(), nullable=False),
        sa.Column("instance_id", sa.UUID(), nullable=False),
        sa.Column("app_scope", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("octet_length(token_hash) = 32", name=op.f("ck_capabilities_token_hash_length")),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["app_instances.instance_id"],
            name=op.f("fk_capabilities_instance_id_app_instances"),
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_capabilities")),
    )
    op.create_index("ix_capabilities_instance", "capabilities", ["instance_id"], unique=False)
    op.create_table(
        "surface_events",
        sa.Column("surface_event_id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("instance_id", sa.UUID(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "event IN ('dimmed', 'undimmed', 'locked', 'unlocked', 'reloaded')",
            name=op.f("ck_surface_events_event"),
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["app_instances.instance_id"],
            name=op.f("fk_surface_events_instance_id_app_instances"),
        ),
        sa.PrimaryKeyConstraint("surface_event_id", name=op.f("pk_surface_events")),
    )
    op.create_index(
        "ix_surface_events_instance", "surface_events", ["instance_id", "created_at"], unique=False
    )
    op.create_table(
        "interactions",
        sa.Column("tool_call_id", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column(
            "choices",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column("status", sa.Text(), server_default=sa.text("'pending'"), nullable=False),
        sa.Column("asked_in_sub_session_id", sa.UUID(), nullable=True),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(status = 'answered') = (answer IS NOT NULL AND answered_at IS NOT NULL)",
            name=op.f("ck_interactions_answered"),
        ),
        sa.CheckConstraint("jsonb_typeof(choices) = 'array'", name=op.f("ck_interactions_choices_array")),
        sa.CheckConstraint("status IN ('pending', 'answered')", name=op.f("ck_interactions_status")),
        sa.CheckConstraint(
            "char_length(prompt) BETWEEN 1 AND 2000", name=op.f("ck_interactions_prompt_length")
        ),
        sa.ForeignKeyConstraint(
            ["asked_in_sub_session_id"],
            ["sub_sessions.sub_session_id"],
            name=op.f("fk_interactions_asked_in_sub_session_id_sub_sessions"),
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["workspaces.conversation_id"],
            name=op.f("fk_interactions_conversation_id_workspaces"),
        ),
        sa.PrimaryKeyConstraint("tool_call_id", name=op.f("pk_interactions")),
    )
    op.create_index(
        "ix_interactions_pending",
        "interactions",
        ["conversation_id", "created_at"],
        unique=False,
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_table(
        "messages",
        sa.Column("message_id", sa.UUID(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("sub_session_id", sa.UUID(), nullable=True),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("role IN ('user', 'agent')", name=op.f("ck_messages_role")),
        sa.CheckConstraint("char_length(text) BETWEEN 1 AND 8000", name=op.f("ck_messages_text_length")),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["workspaces.conversation_id"],
            name=op.f("fk_messages_conversation_id_workspaces"),
        ),
        sa.ForeignKeyConstraint(
            ["sub_session_id"],
            ["sub_sessions.sub_session_id"],
            name=op.f("fk_messages_sub_session_id_sub_sessions"),
        ),
        sa.PrimaryKeyConstraint("message_id", name=op.f("pk_messages")),
    )
    op.create_index(
        "ix_messages_conversation_created", "messages", ["conversation_id", "created_at"], unique=False
    )
    op.create_index(
        "ix_messages_sub_session_created", "messages", ["sub_session_id", "created_at"], unique=False
    )


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
