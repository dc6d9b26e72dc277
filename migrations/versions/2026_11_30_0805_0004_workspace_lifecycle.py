"""workspace lifecycle

Revision ID: 0004
Revises: 0002
Create Date: 2026-11-30 08:05:00+00:00
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


# The database itself refuses what the invariants forbid, whatever the code does.
GUARDS = [
    # A terminal state never changes.
    """
    CREATE FUNCTION operations_final_is_final() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF OLD.state <> 'focusing' AND (NEW.state, NEW.reason, NEW.result::text)
                IS DISTINCT FROM (OLD.state, OLD.reason, OLD.result::text) THEN
            RAISE EXCEPTION 'operation % is already %', OLD.operation_id, OLD.state
                USING ERRCODE = 'check_violation', CONSTRAINT = 'operation_final_is_final';
        END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER operations_final_is_final BEFORE UPDATE ON operations
    FOR EACH ROW EXECUTE FUNCTION operations_final_is_final()
    """,
    # A read-only snapshot never changes and never becomes writable again.
    """
    CREATE FUNCTION instance_states_readonly_is_final() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF OLD.readonly AND (NOT NEW.readonly OR NEW.data IS DISTINCT FROM OLD.data
                             OR NEW.revision <> OLD.revision) THEN
            RAISE EXCEPTION 'snapshot of instance % is read-only', OLD.instance_id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'instance_state_readonly';
        END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER instance_states_readonly_is_final BEFORE UPDATE ON instance_states
    FOR EACH ROW EXECUTE FUNCTION instance_states_readonly_is_final()
    """,
    # An ended sub-session never grows; a message stays in its own conversation. FOR SHARE holds
    # off a concurrent end until this transaction commits.
    """
    CREATE FUNCTION messages_sub_session_open() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        sub record;
    BEGIN
        IF NEW.sub_session_id IS NULL THEN
            RETURN NEW;
        END IF;
        SELECT status, conversation_id INTO sub FROM sub_sessions
        WHERE sub_session_id = NEW.sub_session_id FOR SHARE;
        IF sub.conversation_id IS DISTINCT FROM NEW.conversation_id THEN
            RAISE EXCEPTION 'sub-session % is not in conversation %', NEW.sub_session_id,
                NEW.conversation_id
                USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'message_sub_session_conversation';
        END IF;
        IF sub.status <> 'open' THEN
            RAISE EXCEPTION 'sub-session % has ended', NEW.sub_session_id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'sub_session_ended';
        END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER messages_sub_session_open BEFORE INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION messages_sub_session_open()
    """,
]

# Projection changes recorded in the deciding transaction and announced on commit.
PROJECTIONS = [
    """
    CREATE FUNCTION project(conversation text, kind text, payload jsonb) RETURNS void
    LANGUAGE plpgsql AS $$
    DECLARE
        seq bigint;
    BEGIN
        INSERT INTO projection_events (conversation_id, kind, payload)
        VALUES (conversation, kind, payload) RETURNING event_seq INTO seq;
        PERFORM pg_notify('lineup_projection', seq::text || ' ' || conversation);
    END $$
    """,
    """
    CREATE FUNCTION project_operation() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM project(NEW.conversation_id, 'operation', jsonb_build_object(
            'operation_id', NEW.operation_id, 'tool', NEW.tool, 'tool_call_id', NEW.tool_call_id,
            'instance_id', NEW.instance_id, 'state', NEW.state, 'reason', NEW.reason,
            'activity', NEW.activity, 'started_at', rfc3339(NEW.started_at),
            'ends_at', rfc3339(NEW.ends_at), 'finalized_at', rfc3339(NEW.finalized_at),
            'result', NEW.result));
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER project_operation AFTER INSERT OR UPDATE OF state ON operations
    FOR EACH ROW EXECUTE FUNCTION project_operation()
    """,
    """
    CREATE FUNCTION project_workspace() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' AND NEW.foreground_instance_id IS NOT DISTINCT FROM OLD.foreground_instance_id THEN
            RETURN NULL;
        END IF;
        PERFORM project(NEW.conversation_id, 'workspace', jsonb_build_object(
            'foreground_instance_id', NEW.foreground_instance_id));
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER project_workspace AFTER UPDATE OF foreground_instance_id ON workspaces
    FOR EACH ROW EXECUTE FUNCTION project_workspace()
    """,
    """
    CREATE FUNCTION project_message() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM project(NEW.conversation_id, 'message', jsonb_build_object(
            'message_id', NEW.message_id, 'conversation_id', NEW.conversation_id,
            'sub_session_id', NEW.sub_session_id, 'role', NEW.role, 'text', NEW.text,
            'created_at', rfc3339(NEW.created_at)));
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER project_message AFTER INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION project_message()
    """,
    """
    CREATE FUNCTION project_interaction() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM project(NEW.conversation_id, 'interaction', jsonb_build_object(
            'tool_call_id', NEW.tool_call_id, 'conversation_id', NEW.conversation_id,
            'prompt', NEW.prompt, 'choices', NEW.choices, 'status', NEW.status,
            'asked_in_sub_session_id', NEW.asked_in_sub_session_id, 'answer', NEW.answer,
            'answered_at', rfc3339(NEW.answered_at)));
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER project_interaction AFTER INSERT OR UPDATE OF status ON interactions
    FOR EACH ROW EXECUTE FUNCTION project_interaction()
    """,
]


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
    for statement in (*GUARDS, *PROJECTIONS):
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
