"""core runtime schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 07:38:39.773592+00:00

The functions it first made (rfc3339) live in service/db/sql/, applied by `migrate`.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tool_calls",
        sa.Column("tool_call_id", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("response", postgresql.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "char_length(tool_call_id) BETWEEN 1 AND 255", name=op.f("ck_tool_calls_tool_call_id_length")
        ),
        sa.CheckConstraint("status_code BETWEEN 200 AND 599", name=op.f("ck_tool_calls_status_code")),
        sa.PrimaryKeyConstraint("tool_call_id", name=op.f("pk_tool_calls")),
    )
    op.create_table(
        "workspaces",
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("foreground_instance_id", sa.UUID(), nullable=True),
        sa.Column("outbox_sequence", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "char_length(conversation_id) BETWEEN 1 AND 255",
            name=op.f("ck_workspaces_conversation_id_length"),
        ),
        sa.CheckConstraint("outbox_sequence >= 0", name=op.f("ck_workspaces_outbox_sequence_nonnegative")),
        sa.PrimaryKeyConstraint("conversation_id", name=op.f("pk_workspaces")),
    )
    op.create_table(
        "app_instances",
        sa.Column("instance_id", sa.UUID(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("app_scope", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'open'"), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(status = 'closed') = (closed_at IS NOT NULL)",
            name=op.f("ck_app_instances_closed_at_iff_closed"),
        ),
        sa.CheckConstraint("status IN ('open', 'closed')", name=op.f("ck_app_instances_status")),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["workspaces.conversation_id"],
            name=op.f("fk_app_instances_conversation_id_workspaces"),
        ),
        sa.PrimaryKeyConstraint("instance_id", name=op.f("pk_app_instances")),
    )
    op.create_index(
        "ix_app_instances_conversation_opened",
        "app_instances",
        ["conversation_id", "opened_at"],
        unique=False,
    )
    # workspaces and app_instances refer to each other: this key is added once both exist.
    op.create_foreign_key(
        op.f("fk_workspaces_foreground_instance_id_app_instances"),
        "workspaces",
        "app_instances",
        ["foreground_instance_id"],
        ["instance_id"],
    )
    op.create_index(
        "uq_app_instances_one_open_per_scope",
        "app_instances",
        ["conversation_id", "app_scope"],
        unique=True,
        postgresql_where=sa.text("status = 'open'"),
    )
    op.create_table(
        "instance_states",
        sa.Column("instance_id", sa.UUID(), nullable=False),
        sa.Column("app_scope", sa.Text(), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("revision", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "data",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("readonly", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("jsonb_typeof(data) = 'object'", name=op.f("ck_instance_states_data_is_object")),
        sa.CheckConstraint("revision >= 0", name=op.f("ck_instance_states_revision_nonnegative")),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["app_instances.instance_id"],
            name=op.f("fk_instance_states_instance_id_app_instances"),
        ),
        sa.PrimaryKeyConstraint("instance_id", name=op.f("pk_instance_states")),
    )
    op.create_table(
        "operations",
        sa.Column("operation_id", sa.UUID(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("app_scope", sa.Text(), nullable=False),
        sa.Column("instance_id", sa.UUID(), nullable=False),
        sa.Column("state", sa.Text(), server_default=sa.text("'focusing'"), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("duration_seconds", sa.Integer(), nullable=False),
        sa.Column("activity", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finalized_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column(
            "lateness_ms",
            sa.Integer(),
            sa.Computed(
                "CASE WHEN reason = 'deadline_reached' THEN (EXTRACT(EPOCH FROM finalized_at - ends_at) * 1000)::integer END",
                persisted=True,
            ),
            nullable=True,
        ),
        sa.CheckConstraint(
            "COALESCE((state = 'focusing' AND reason IS NULL AND finalized_at IS NULL AND result IS NULL) OR (state = 'completed' AND reason = 'deadline_reached') OR (state = 'interrupted' AND reason IN ('agent_interrupt', 'user_left_workspace')) OR (state = 'cancelled' AND reason = 'app_closed'), false)",
            name=op.f("ck_operations_state_matches_reason"),
        ),
        sa.CheckConstraint(
            "reason IS NULL OR reason IN ('deadline_reached', 'agent_interrupt', 'user_left_workspace', 'app_closed')",
            name=op.f("ck_operations_reason"),
        ),
        sa.CheckConstraint(
            "state <> 'completed' OR finalized_at >= ends_at", name=op.f("ck_operations_completed_not_early")
        ),
        sa.CheckConstraint(
            "state = 'focusing' OR (finalized_at IS NOT NULL AND result IS NOT NULL)",
            name=op.f("ck_operations_final_has_result"),
        ),
        sa.CheckConstraint(
            "state IN ('focusing', 'completed', 'interrupted', 'cancelled')", name=op.f("ck_operations_state")
        ),
        sa.CheckConstraint(
            "activity IS NULL OR char_length(activity) <= 200", name=op.f("ck_operations_activity_length")
        ),
        sa.CheckConstraint("duration_seconds BETWEEN 1 AND 14400", name=op.f("ck_operations_duration")),
        sa.CheckConstraint(
            "ends_at = started_at + make_interval(secs => duration_seconds)",
            name=op.f("ck_operations_ends_at"),
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["workspaces.conversation_id"],
            name=op.f("fk_operations_conversation_id_workspaces"),
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["app_instances.instance_id"],
            name=op.f("fk_operations_instance_id_app_instances"),
        ),
        sa.PrimaryKeyConstraint("operation_id", name=op.f("pk_operations")),
        sa.UniqueConstraint("tool_call_id", name=op.f("uq_operations_tool_call_id")),
    )
    op.create_index(
        "ix_operations_conversation_started", "operations", ["conversation_id", "started_at"], unique=False
    )
    op.create_index(
        "ix_operations_focusing_ends_at",
        "operations",
        ["ends_at"],
        unique=False,
        postgresql_where=sa.text("state = 'focusing'"),
    )
    op.create_index("ix_operations_instance", "operations", ["instance_id"], unique=False)
    op.create_index(
        "uq_operations_one_focusing_per_conversation",
        "operations",
        ["conversation_id"],
        unique=True,
        postgresql_where=sa.text("state = 'focusing' AND tool = 'pomodoro.start'"),
    )
    op.create_table(
        "sub_sessions",
        sa.Column("sub_session_id", sa.UUID(), nullable=False),
        sa.Column("instance_id", sa.UUID(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'open'"), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(status = 'ended') = (ended_at IS NOT NULL)", name=op.f("ck_sub_sessions_ended_at_iff_ended")
        ),
        sa.CheckConstraint("status IN ('open', 'ended')", name=op.f("ck_sub_sessions_status")),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["app_instances.instance_id"],
            name=op.f("fk_sub_sessions_instance_id_app_instances"),
        ),
        sa.PrimaryKeyConstraint("sub_session_id", name=op.f("pk_sub_sessions")),
        sa.UniqueConstraint("instance_id", name=op.f("uq_sub_sessions_instance_id")),
    )
    op.create_table(
        "outbox",
        sa.Column("event_id", sa.UUID(), nullable=False),
        sa.Column("operation_id", sa.UUID(), nullable=True),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'pending'"), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "next_attempt_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(status = 'delivered') = (delivered_at IS NOT NULL)", name=op.f("ck_outbox_delivered_at")
        ),
        sa.CheckConstraint("status IN ('pending', 'delivered', 'dead')", name=op.f("ck_outbox_status")),
        sa.CheckConstraint(
            "(lease_owner IS NULL) = (lease_expires_at IS NULL)", name=op.f("ck_outbox_lease_pair")
        ),
        sa.CheckConstraint("attempts >= 0", name=op.f("ck_outbox_attempts_nonnegative")),
        sa.ForeignKeyConstraint(
            ["operation_id"], ["operations.operation_id"], name=op.f("fk_outbox_operation_id_operations")
        ),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_outbox")),
        sa.UniqueConstraint("conversation_id", "sequence", name=op.f("uq_outbox_conversation_id_sequence")),
        sa.UniqueConstraint("tool_call_id", name=op.f("uq_outbox_tool_call_id")),
    )
    op.create_index(
        "ix_outbox_due",
        "outbox",
        ["next_attempt_at"],
        unique=False,
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index("ix_outbox_status_created", "outbox", ["status", "created_at"], unique=False)
    op.create_table(
        "outbox_attempts",
        sa.Column("attempt_id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("event_id", sa.UUID(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("relay_id", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error_class", sa.Text(), nullable=True),
        sa.Column("response_excerpt", sa.Text(), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "outcome IN ('delivered', 'retry', 'dead', 'lease_lost')", name=op.f("ck_outbox_attempts_outcome")
        ),
        sa.CheckConstraint("attempt >= 1", name=op.f("ck_outbox_attempts_attempt_positive")),
        sa.CheckConstraint(
            "status_code IS NOT NULL OR error_class IS NOT NULL", name=op.f("ck_outbox_attempts_has_result")
        ),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["outbox.event_id"],
            name=op.f("fk_outbox_attempts_event_id_outbox"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("attempt_id", name=op.f("pk_outbox_attempts")),
        sa.UniqueConstraint("event_id", "attempt", name=op.f("uq_outbox_attempts_event_id_attempt")),
    )


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
