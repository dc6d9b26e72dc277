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
    # The W3C trace context of the call that opened it (migration 0026), which the deadline
    # sweeper's settle links to, and which its outbox row carries when whatever ends it says none.
    Column("traceparent", Text, nullable=True),
    Column("tracestate", Text, nullable=True),
    # The error the operation fails with, {"code", "message"} (migration 0029): given by its app's
    # decision (service/db/sql/75_app_api.sql) — while it is focusing, the one it fails with when its
    # deadline comes (app_fail_at_deadline); once failed, the one it failed with.
    Column("failure", JSONB, nullable=True),
    PrimaryKeyConstraint("operation_id", "conversation_id"),
    UniqueConstraint("tool_call_id", "conversation_id"),
    ForeignKeyConstraint(
        ["instance_id", "conversation_id"], ["app_instances.instance_id", "app_instances.conversation_id"]
    ),
    # The row's rules are the operations_guard trigger's (service/db/sql/20_guards.sql), each under
    # the name of the CHECK that held it until migration 0020 — the one table whose rules are not
    # CHECK constraints: its eight, read back from the catalog and prepared again at a cycle's INSERT
    # and UPDATE, cost 0.82 M database instructions, 18 % of a start+interrupt cycle (migration
    # 0024, bench/README.md). They are:
    #   ck_operations_state: state is focusing, completed, interrupted, cancelled or failed;
    #   ck_operations_reason: reason is NULL or deadline_reached, agent_interrupt,
    #     person_interrupt, user_left_workspace, app_closed or app_failed;
    #   ck_operations_state_matches_reason: focusing without reason, finalized_at or result;
    #     completed for deadline_reached; interrupted for agent_interrupt, person_interrupt or
    #     user_left_workspace; cancelled for app_closed; failed for deadline_reached or app_failed;
    #   ck_operations_failure: failure NULL or {"code": a word, "message": at most 500 characters};
    #     a failed operation has one, a completed one none (migration 0029);
    #   ck_operations_final_has_result: a final state has finalized_at and result;
    #   ck_operations_completed_not_early: completed no earlier than ends_at;
    #   ck_operations_duration: duration_seconds from 1 to 14400;
    #   ck_operations_ends_at: ends_at = started_at + duration_seconds;
    #   ck_operations_activity_length: activity NULL or at most 200 characters.
    # A terminal state never changing is a rule about a change, not a row: the trigger's as well.
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
