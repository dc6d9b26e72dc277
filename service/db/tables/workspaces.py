"""A conversation's workspace: its foreground, the app instances it opened, their sub-sessions
and snapshots, and the operations (a Pomodoro's focus period) they run."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
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
    # The conversation_id's length (1 to 255) and a non-negative outbox_sequence are the
    # workspaces_guard trigger's (service/db/sql/20_guards.sql), under their CHECK names of before
    # migration 0020: a tool call updates this row two or three times, and a CHECK is read back from
    # the catalog and prepared again at every statement.
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
    # Its status (open or closed) and closed_at set exactly when closed are the app_instances_guard
    # trigger's (service/db/sql/20_guards.sql), under their CHECK names of before migration 0022: a
    # CHECK is read back from the catalog and prepared again at every statement.
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
    # Its status (open or ended) and ended_at set exactly when ended are the sub_sessions_guard
    # trigger's (service/db/sql/20_guards.sql), under their CHECK names of before migration 0022.
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
    # A non-negative revision and an object as data are the instance_states_readonly_is_final
    # trigger's (service/db/sql/20_guards.sql), under their CHECK names of before migration 0022: a
    # CHECK is read back from the catalog and prepared again at every statement.
)

operations = Table(
    "operations",
    metadata,
    Column("operation_id", UUID(as_uuid=True), nullable=False),
    Column("tool", Text, nullable=False),
    Column("tool_call_id", Text, nullable=False),
    # Its workspace exists through its instance's key below (instance_id is never NULL, and an
    # instance's conversation_id references workspaces): the key of its own to workspaces checked the
    # same thing again at every INSERT and went in migration 0022.
    Column("conversation_id", Text, nullable=False),
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
    PrimaryKeyConstraint("operation_id", "conversation_id"),
    UniqueConstraint("tool_call_id", "conversation_id"),
    ForeignKeyConstraint(
        ["instance_id", "conversation_id"], ["app_instances.instance_id", "app_instances.conversation_id"]
    ),
    # The row's rules (a state with its reason, a final state with its result, the duration, the
    # deadline, the activity's length, a terminal state never changing) are the operations_guard
    # trigger's (service/db/sql/20_guards.sql), under their CHECK names of before migration 0020:
    # a CHECK is read back from the catalog and prepared again at every statement.
    # At most one focusing Pomodoro per conversation (another app's own rule is its decision's).
    Index(
        "uq_operations_one_focusing_per_conversation",
        "conversation_id",
        unique=True,
        postgresql_where=text("state = 'focusing' AND tool = 'pomodoro.start'"),
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
