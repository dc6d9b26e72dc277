"""A conversation's workspace: its foreground, the app instances it opened, their sub-sessions
and snapshots, and the operations (a Pomodoro's focus period) they run."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID

from service.db.tables.conventions import (
    OPERATION_REASONS,
    OPERATION_STATES,
    any_of,
    metadata,
    timestamp,
)

# The foreground per conversation (NULL = Interact) and the per-conversation outbox sequence.
# Every use case that changes a conversation locks this row first: one lock order, no deadlocks.
workspaces = Table(
    "workspaces",
    metadata,
    Column("conversation_id", Text, primary_key=True),
    Column("foreground_instance_id", UUID(as_uuid=True), nullable=True),
    Column("outbox_sequence", BigInteger, nullable=False, server_default=text("0")),
    timestamp("created_at", default=True),
    timestamp("updated_at", default=True),
    CheckConstraint("char_length(conversation_id) BETWEEN 1 AND 255", name="conversation_id_length"),
    CheckConstraint("outbox_sequence >= 0", name="outbox_sequence_nonnegative"),
    # Every key between tables of conversation data includes conversation_id (its last column):
    # what Citus needs of them (docs/scaling.md, migration 0018).
    ForeignKeyConstraint(
        ["foreground_instance_id", "conversation_id"],
        ["app_instances.instance_id", "app_instances.conversation_id"],
        use_alter=True,
    ),
    # Removing an instance checks no foreground names it (history retention, migration 0015) through
    # the primary key: the key above holds conversation_id (migration 0018), so that check and
    # retention's look at one row each. ix_workspaces_foreground, which they used before, is gone
    # (migration 0022): its entries made every change of the foreground a non-HOT update.
)

app_instances = Table(
    "app_instances",
    metadata,
    Column("instance_id", UUID(as_uuid=True), nullable=False),
    Column(
        "conversation_id",
        Text,
        ForeignKey("workspaces.conversation_id"),
        nullable=False,
    ),
    Column("app_scope", Text, nullable=False),
    Column("status", Text, nullable=False, server_default=text("'open'")),
    timestamp("opened_at", default=True),
    timestamp("closed_at", nullable=True),
    PrimaryKeyConstraint("instance_id", "conversation_id"),
    CheckConstraint(any_of("status", ("open", "closed")), name="status"),
    CheckConstraint("(status = 'closed') = (closed_at IS NOT NULL)", name="closed_at_iff_closed"),
    # An app has at most one open instance per conversation: resuming reuses it.
    Index(
        "uq_app_instances_one_open_per_scope",
        "conversation_id",
        "app_scope",
        unique=True,
        postgresql_where=text("status = 'open'"),
    ),
    Index("ix_app_instances_conversation_opened", "conversation_id", "opened_at"),
)

sub_sessions = Table(
    "sub_sessions",
    metadata,
    Column("sub_session_id", UUID(as_uuid=True), nullable=False),
    Column("instance_id", UUID(as_uuid=True), nullable=False),
    Column("conversation_id", Text, nullable=False),
    PrimaryKeyConstraint("sub_session_id", "conversation_id"),
    UniqueConstraint("instance_id", "conversation_id"),
    ForeignKeyConstraint(
        ["instance_id", "conversation_id"], ["app_instances.instance_id", "app_instances.conversation_id"]
    ),
    Column("status", Text, nullable=False, server_default=text("'open'")),
    timestamp("started_at", default=True),
    timestamp("ended_at", nullable=True),
    CheckConstraint(any_of("status", ("open", "ended")), name="status"),
    CheckConstraint("(status = 'ended') = (ended_at IS NOT NULL)", name="ended_at_iff_ended"),
)

# app.instance-state.v1: one snapshot per instance, display data only.
instance_states = Table(
    "instance_states",
    metadata,
    Column("instance_id", UUID(as_uuid=True), nullable=False),
    Column("app_scope", Text, nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("revision", BigInteger, nullable=False, server_default=text("0")),
    Column("data", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("readonly", Boolean, nullable=False, server_default=text("false")),
    timestamp("updated_at", default=True),
    Column("conversation_id", Text, nullable=False),
    PrimaryKeyConstraint("instance_id", "conversation_id"),
    ForeignKeyConstraint(
        ["instance_id", "conversation_id"], ["app_instances.instance_id", "app_instances.conversation_id"]
    ),
    CheckConstraint("revision >= 0", name="revision_nonnegative"),
    CheckConstraint("jsonb_typeof(data) = 'object'", name="data_is_object"),
)

operations = Table(
    "operations",
    metadata,
    Column("operation_id", UUID(as_uuid=True), nullable=False),
    Column("tool", Text, nullable=False),
    Column("tool_call_id", Text, nullable=False),
    Column("conversation_id", Text, ForeignKey("workspaces.conversation_id"), nullable=False),
    Column("app_scope", Text, nullable=False),
    Column("instance_id", UUID(as_uuid=True), nullable=False),
    Column("state", Text, nullable=False, server_default=text("'focusing'")),
    Column("reason", Text, nullable=True),
    Column("duration_seconds", Integer, nullable=False),
    Column("activity", Text, nullable=True),
    timestamp("started_at"),
    timestamp("ends_at"),
    timestamp("finalized_at", nullable=True),
    Column("result", JSONB, nullable=True),
    # How late the deadline was decided: kept for every deadline decision, by the operations_guard
    # trigger (service/db/sql/20_guards.sql; a stored generated column until migration 0020).
    Column("lateness_ms", Integer, nullable=True),
    # Whether its Tool declares at most one running per conversation (its manifest's
    # "operation": {"one_running_per_conversation": true}, app_tools), marked when it opens by the
    # operations_guard trigger: what the unique index below holds, for every Tool alike. NULL for the
    # operations opened before migration 0024 (a column with a default could not be added:
    # operation_json takes the table's row type).
    Column("one_running", Boolean, nullable=True),
    PrimaryKeyConstraint("operation_id", "conversation_id"),
    UniqueConstraint("tool_call_id", "conversation_id"),
    ForeignKeyConstraint(
        ["instance_id", "conversation_id"], ["app_instances.instance_id", "app_instances.conversation_id"]
    ),
    # The row's rules. A terminal state never changing is a rule about a change, not a row: the
    # operations_guard trigger's (service/db/sql/20_guards.sql).
    CheckConstraint(any_of("state", OPERATION_STATES), name="state"),
    CheckConstraint(f"reason IS NULL OR {any_of('reason', OPERATION_REASONS)}", name="reason"),
    CheckConstraint(
        # COALESCE: a NULL reason must fail the check, not pass it as unknown.
        "COALESCE((state = 'focusing' AND reason IS NULL AND finalized_at IS NULL AND result IS NULL)"
        " OR (state = 'completed' AND reason = 'deadline_reached')"
        " OR (state = 'interrupted' AND reason IN ('agent_interrupt', 'user_left_workspace'))"
        " OR (state = 'cancelled' AND reason = 'app_closed'), false)",
        name="state_matches_reason",
    ),
    CheckConstraint(
        "state = 'focusing' OR (finalized_at IS NOT NULL AND result IS NOT NULL)",
        name="final_has_result",
    ),
    CheckConstraint("state <> 'completed' OR finalized_at >= ends_at", name="completed_not_early"),
    CheckConstraint("duration_seconds BETWEEN 1 AND 14400", name="duration"),
    CheckConstraint("ends_at = started_at + make_interval(secs => duration_seconds)", name="ends_at"),
    CheckConstraint("activity IS NULL OR char_length(activity) <= 200", name="activity_length"),
    # At most one running operation per conversation of each Tool that declares it (one_running),
    # whichever app's: no Tool is named here.
    Index(
        "uq_operations_one_running_per_tool",
        "conversation_id",
        "tool",
        unique=True,
        postgresql_where=text("state = 'focusing' AND one_running"),
    ),
    # A conversation's focusing operations, of every app (the deadline rule of any request).
    Index(
        "ix_operations_focusing_conversation",
        "conversation_id",
        postgresql_where=text("state = 'focusing'"),
    ),
    # The sweeper's index: only focusing rows, ordered by deadline.
    Index("ix_operations_focusing_ends_at", "ends_at", postgresql_where=text("state = 'focusing'")),
    Index("ix_operations_conversation_started", "conversation_id", "started_at"),
    Index("ix_operations_instance", "instance_id"),
)

# What each Tool that opens operations declares of them in its app's manifest ("operation"), as
# migrate copies it from the app folders it applies (service.db.code.declare_tools): the engine holds
# every Tool's operations to these, the same way (service/db/sql/75_app_api.sql, app_open_operation).
app_tools = Table(
    "app_tools",
    metadata,
    Column("tool", Text, primary_key=True),
    Column("app_scope", Text, nullable=False),
    Column("one_running", Boolean, nullable=False),
    Column("max_seconds", Integer, nullable=False),
    CheckConstraint("max_seconds BETWEEN 1 AND 14400", name="max_seconds"),
)
