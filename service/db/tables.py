"""The schema as SQLAlchemy Core tables.

The migrations in ``migrations/`` create it; ``tests/integration/test_schema_drift.py`` proves the
migrated database and these definitions agree. Runtime code uses named SQL statements, not the ORM.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Computed,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSON, JSONB, UUID

from service.domain.delivery import Circuit
from service.domain.operations import Reason, State
from service.domain.outbox import AttemptOutcome, OutboxStatus

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

NOW = text("now()")
# The domain's words, in the order the checks list them.
OPERATION_STATES = tuple(state.value for state in State)
OPERATION_REASONS = tuple(reason.value for reason in Reason)
OUTBOX_STATUSES = tuple(status.value for status in OutboxStatus)
ATTEMPT_OUTCOMES = tuple(outcome.value for outcome in AttemptOutcome)
CIRCUIT_STATES = tuple(state.value for state in Circuit)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _ts(name: str, *, nullable: bool = False, default: bool = False) -> Column[object]:
    return Column(name, DateTime(timezone=True), nullable=nullable, server_default=NOW if default else None)


# The foreground per conversation (NULL = Interact) and the per-conversation outbox sequence.
# Every use case that changes a conversation locks this row first: one lock order, no deadlocks.
workspaces = Table(
    "workspaces",
    metadata,
    Column("conversation_id", Text, primary_key=True),
    Column(
        "foreground_instance_id",
        UUID(as_uuid=True),
        ForeignKey("app_instances.instance_id", use_alter=True),
        nullable=True,
    ),
    Column("outbox_sequence", BigInteger, nullable=False, server_default=text("0")),
    _ts("created_at", default=True),
    _ts("updated_at", default=True),
    CheckConstraint("char_length(conversation_id) BETWEEN 1 AND 255", name="conversation_id_length"),
    CheckConstraint("outbox_sequence >= 0", name="outbox_sequence_nonnegative"),
)

app_instances = Table(
    "app_instances",
    metadata,
    Column("instance_id", UUID(as_uuid=True), primary_key=True),
    Column(
        "conversation_id",
        Text,
        ForeignKey("workspaces.conversation_id"),
        nullable=False,
    ),
    Column("app_scope", Text, nullable=False),
    Column("status", Text, nullable=False, server_default=text("'open'")),
    _ts("opened_at", default=True),
    _ts("closed_at", nullable=True),
    CheckConstraint("status IN ('open', 'closed')", name="status"),
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
    Column("sub_session_id", UUID(as_uuid=True), primary_key=True),
    Column(
        "instance_id",
        UUID(as_uuid=True),
        ForeignKey("app_instances.instance_id"),
        nullable=False,
        unique=True,
    ),
    Column("conversation_id", Text, nullable=False),
    Column("status", Text, nullable=False, server_default=text("'open'")),
    _ts("started_at", default=True),
    _ts("ended_at", nullable=True),
    CheckConstraint("status IN ('open', 'ended')", name="status"),
    CheckConstraint("(status = 'ended') = (ended_at IS NOT NULL)", name="ended_at_iff_ended"),
)

# app.instance-state.v1: one snapshot per instance, display data only.
instance_states = Table(
    "instance_states",
    metadata,
    Column(
        "instance_id",
        UUID(as_uuid=True),
        ForeignKey("app_instances.instance_id"),
        primary_key=True,
    ),
    Column("app_scope", Text, nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("revision", BigInteger, nullable=False, server_default=text("0")),
    Column("data", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("readonly", Boolean, nullable=False, server_default=text("false")),
    _ts("updated_at", default=True),
    CheckConstraint("revision >= 0", name="revision_nonnegative"),
    CheckConstraint("jsonb_typeof(data) = 'object'", name="data_is_object"),
)

operations = Table(
    "operations",
    metadata,
    Column("operation_id", UUID(as_uuid=True), primary_key=True),
    Column("tool", Text, nullable=False),
    Column("tool_call_id", Text, nullable=False, unique=True),
    Column("conversation_id", Text, ForeignKey("workspaces.conversation_id"), nullable=False),
    Column("app_scope", Text, nullable=False),
    Column("instance_id", UUID(as_uuid=True), ForeignKey("app_instances.instance_id"), nullable=False),
    Column("state", Text, nullable=False, server_default=text("'focusing'")),
    Column("reason", Text, nullable=True),
    Column("duration_seconds", Integer, nullable=False),
    Column("activity", Text, nullable=True),
    _ts("started_at"),
    _ts("ends_at"),
    _ts("finalized_at", nullable=True),
    Column("result", JSONB, nullable=True),
    # How late the deadline was decided: kept for every deadline decision.
    Column(
        "lateness_ms",
        Integer,
        Computed(
            "CASE WHEN reason = 'deadline_reached' "
            "THEN (EXTRACT(EPOCH FROM finalized_at - ends_at) * 1000)::integer END",
            persisted=True,
        ),
    ),
    CheckConstraint(_in("state", OPERATION_STATES), name="state"),
    CheckConstraint(f"reason IS NULL OR {_in('reason', OPERATION_REASONS)}", name="reason"),
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
    # At most one focusing Pomodoro per conversation.
    Index(
        "uq_operations_one_focusing_per_conversation",
        "conversation_id",
        unique=True,
        postgresql_where=text("state = 'focusing' AND tool = 'pomodoro.start'"),
    ),
    # The sweeper's index: only focusing rows, ordered by deadline.
    Index("ix_operations_focusing_ends_at", "ends_at", postgresql_where=text("state = 'focusing'")),
    Index("ix_operations_conversation_started", "conversation_id", "started_at"),
    Index("ix_operations_instance", "instance_id"),
)

# The idempotency record of every answered tool call (401/404/422 are not recorded).
tool_calls = Table(
    "tool_calls",
    metadata,
    Column("tool_call_id", Text, primary_key=True),
    Column("conversation_id", Text, nullable=False),
    Column("tool", Text, nullable=False),
    Column("fingerprint", Text, nullable=False),
    Column("status_code", Integer, nullable=False),
    # json, not jsonb: a replay returns the first answer with its keys in their original order.
    Column("response", JSON, nullable=False),
    _ts("created_at", default=True),
    CheckConstraint("char_length(tool_call_id) BETWEEN 1 AND 255", name="tool_call_id_length"),
    CheckConstraint("status_code BETWEEN 200 AND 599", name="status_code"),
    # BRIN: the operators' list of recent calls, at next to no cost per tool call.
    Index("ix_tool_calls_created_at", "created_at", postgresql_using="brin"),
)

outbox = Table(
    "outbox",
    metadata,
    Column("event_id", UUID(as_uuid=True), primary_key=True),
    Column("operation_id", UUID(as_uuid=True), ForeignKey("operations.operation_id"), nullable=True),
    Column("tool", Text, nullable=False),
    Column("tool_call_id", Text, nullable=False, unique=True),
    Column("conversation_id", Text, nullable=False),
    # Per-conversation commit order: taken from workspaces.outbox_sequence under its row lock.
    Column("sequence", BigInteger, nullable=False),
    Column("status", Text, nullable=False, server_default=text("'pending'")),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    _ts("next_attempt_at", default=True),
    Column("last_error", Text, nullable=True),
    _ts("created_at", default=True),
    _ts("delivered_at", nullable=True),
    Column("payload", JSONB, nullable=False),
    Column("lease_owner", Text, nullable=True),
    _ts("lease_expires_at", nullable=True),
    CheckConstraint(_in("status", OUTBOX_STATUSES), name="status"),
    CheckConstraint("attempts >= 0", name="attempts_nonnegative"),
    CheckConstraint("(status = 'delivered') = (delivered_at IS NOT NULL)", name="delivered_at"),
    CheckConstraint("(lease_owner IS NULL) = (lease_expires_at IS NULL)", name="lease_pair"),
    UniqueConstraint("conversation_id", "sequence"),
    Index("ix_outbox_due", "next_attempt_at", postgresql_where=text("status = 'pending'")),
    Index("ix_outbox_status_created", "status", "created_at"),
    # The head of each conversation's pending queue (order per conversation).
    Index(
        "ix_outbox_pending_conversation_sequence",
        "conversation_id",
        "sequence",
        postgresql_where=text("status = 'pending'"),
    ),
    # Dead rows in their conversations' order, for a bulk recovery in batches (migration 0012).
    Index(
        "ix_outbox_dead_conversation_sequence",
        "conversation_id",
        "sequence",
        postgresql_where=text("status = 'dead'"),
    ),
)

outbox_attempts = Table(
    "outbox_attempts",
    metadata,
    Column("attempt_id", BigInteger, Identity(always=True), primary_key=True),
    Column(
        "event_id",
        UUID(as_uuid=True),
        ForeignKey("outbox.event_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("attempt", Integer, nullable=False),
    Column("relay_id", Text, nullable=False),
    _ts("started_at"),
    Column("duration_ms", Integer, nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("error_class", Text, nullable=True),
    Column("response_excerpt", Text, nullable=True),
    Column("outcome", Text, nullable=False),
    CheckConstraint("attempt >= 1", name="attempt_positive"),
    CheckConstraint(_in("outcome", ATTEMPT_OUTCOMES), name="outcome"),
    CheckConstraint("status_code IS NOT NULL OR error_class IS NOT NULL", name="has_result"),
    UniqueConstraint("event_id", "attempt"),
    # The console's last hour, by minute (built CONCURRENTLY by migration 0012).
    Index("ix_outbox_attempts_started_at", "started_at"),
)

# SDK capabilities: random tokens, stored only as SHA-256 digests, bound to one instance.
capabilities = Table(
    "capabilities",
    metadata,
    Column("token_hash", LargeBinary, primary_key=True),
    Column("instance_id", UUID(as_uuid=True), ForeignKey("app_instances.instance_id"), nullable=False),
    Column("app_scope", Text, nullable=False),
    Column("conversation_id", Text, nullable=False),
    _ts("created_at", default=True),
    # The person's session it was minted under (NULL: HOST_TOKEN itself): it ends with that session.
    Column(
        "host_session_id",
        UUID(as_uuid=True),
        ForeignKey("host_sessions.session_id", ondelete="CASCADE"),
        nullable=True,
    ),
    CheckConstraint("octet_length(token_hash) = 32", name="token_hash_length"),
    Index("ix_capabilities_instance", "instance_id"),
    Index(
        "ix_capabilities_host_session_id",
        "host_session_id",
        postgresql_where=text("host_session_id IS NOT NULL"),
    ),
)

# Surface events (dimmed, locked, reloaded, ...): recorded, never interrupting.
surface_events = Table(
    "surface_events",
    metadata,
    Column("surface_event_id", BigInteger, Identity(always=True), primary_key=True),
    Column("instance_id", UUID(as_uuid=True), ForeignKey("app_instances.instance_id"), nullable=False),
    Column("event", Text, nullable=False),
    _ts("created_at", default=True),
    CheckConstraint("event IN ('dimmed', 'undimmed', 'locked', 'unlocked', 'reloaded')", name="event"),
    Index("ix_surface_events_instance", "instance_id", "created_at"),
)

# The main conversation (sub_session_id NULL) and each app sub-session keep their messages apart.
messages = Table(
    "messages",
    metadata,
    Column("message_id", UUID(as_uuid=True), primary_key=True),
    Column("conversation_id", Text, ForeignKey("workspaces.conversation_id"), nullable=False),
    Column("sub_session_id", UUID(as_uuid=True), ForeignKey("sub_sessions.sub_session_id"), nullable=True),
    Column("role", Text, nullable=False),
    Column("text", Text, nullable=False),
    _ts("created_at", default=True),
    CheckConstraint("role IN ('user', 'agent')", name="role"),
    CheckConstraint("char_length(text) BETWEEN 1 AND 8000", name="text_length"),
    Index("ix_messages_conversation_created", "conversation_id", "created_at"),
    Index("ix_messages_sub_session_created", "sub_session_id", "created_at"),
)

# Interact standard interactions (interact.ask): owned by the conversation, decided once.
interactions = Table(
    "interactions",
    metadata,
    Column("tool_call_id", Text, primary_key=True),
    Column("conversation_id", Text, ForeignKey("workspaces.conversation_id"), nullable=False),
    Column("prompt", Text, nullable=False),
    Column("choices", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("status", Text, nullable=False, server_default=text("'pending'")),
    Column(
        "asked_in_sub_session_id",
        UUID(as_uuid=True),
        ForeignKey("sub_sessions.sub_session_id"),
        nullable=True,
    ),
    Column("answer", Text, nullable=True),
    _ts("created_at", default=True),
    _ts("answered_at", nullable=True),
    CheckConstraint("status IN ('pending', 'answered')", name="status"),
    CheckConstraint(
        "(status = 'answered') = (answer IS NOT NULL AND answered_at IS NOT NULL)", name="answered"
    ),
    CheckConstraint("char_length(prompt) BETWEEN 1 AND 2000", name="prompt_length"),
    CheckConstraint("jsonb_typeof(choices) = 'array'", name="choices_array"),
    Index(
        "ix_interactions_pending",
        "conversation_id",
        "created_at",
        postgresql_where=text("status = 'pending'"),
    ),
)

# The task id naming an interact.ask run as an MCP task: random, unlike the caller's tool_call_id.
interaction_tasks = Table(
    "interaction_tasks",
    metadata,
    Column("task_id", UUID(as_uuid=True), primary_key=True),
    Column("tool_call_id", Text, ForeignKey("interactions.tool_call_id"), nullable=False, unique=True),
    _ts("created_at", default=True),
)

# Projection changes for the Host's event stream; written by triggers in the deciding
# transactions, announced with NOTIFY, replayed after a reconnect from Last-Event-ID.
projection_events = Table(
    "projection_events",
    metadata,
    Column("event_seq", BigInteger, Identity(always=True), primary_key=True),
    Column("conversation_id", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("payload", JSONB, nullable=False),
    _ts("created_at", default=True),
    CheckConstraint("kind IN ('operation', 'workspace', 'message', 'interaction')", name="kind"),
    Index("ix_projection_events_conversation_seq", "conversation_id", "event_seq"),
)

# A person's session, minted by the trusted Host backend (HOST_TOKEN) and scoped to conversations.
host_sessions = Table(
    "host_sessions",
    metadata,
    Column("session_id", UUID(as_uuid=True), primary_key=True),
    Column("subject", Text, nullable=False),
    Column("conversation_ids", ARRAY(Text), nullable=True),
    _ts("created_at", default=True),
    _ts("expires_at"),
    _ts("revoked_at", nullable=True),
    CheckConstraint("char_length(subject) BETWEEN 1 AND 255", name="subject_length"),
    CheckConstraint(
        "conversation_ids IS NULL OR cardinality(conversation_ids) BETWEEN 1 AND 1000",
        name="conversation_count",
    ),
    CheckConstraint("expires_at > created_at", name="expires_after_created"),
    Index("ix_host_sessions_expires_at", "expires_at"),
)

# The database code applied from service/db/sql/ (service.db.code): one row per function, type,
# trigger and view, with the checksum of the text that made it, so `migrate` touches only what changed.
database_code = Table(
    "database_code",
    metadata,
    Column("kind", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("checksum", Text, nullable=False),
    _ts("applied_at", default=True),
    CheckConstraint("kind IN ('type', 'function', 'trigger', 'view')", name="kind"),
)

# The operator console's sign-ins: its signed cookie names one, and signing out ends it everywhere.
console_sessions = Table(
    "console_sessions",
    metadata,
    Column("session_id", UUID(as_uuid=True), primary_key=True),
    _ts("created_at", default=True),
    _ts("expires_at"),
    _ts("revoked_at", nullable=True),
    CheckConstraint("expires_at > created_at", name="expires_after_created"),
    Index("ix_console_sessions_expires_at", "expires_at"),
)

# Delivery control: one row per endpoint the relays deliver to (today only ``agent``). An
# operator's pause and the endpoint's circuit live here, so every relay and the console see them.
delivery_endpoints = Table(
    "delivery_endpoints",
    metadata,
    Column("endpoint", Text, primary_key=True),
    _ts("paused_at", nullable=True),
    Column("paused_by", Text, nullable=True),
    Column("pause_reason", Text, nullable=True),
    Column("circuit", Text, nullable=False, server_default=text("'closed'")),
    _ts("circuit_since", default=True),
    # While not closed: the earliest moment of the next probe (a Retry-After pushes it out).
    _ts("next_probe_at", nullable=True),
    # The relay whose probe is in flight, until its lease expires.
    Column("probe_owner", Text, nullable=True),
    _ts("probe_expires_at", nullable=True),
    _ts("last_probe_at", nullable=True),
    Column("last_error", Text, nullable=True),
    _ts("updated_at", default=True),
    CheckConstraint(_in("circuit", CIRCUIT_STATES), name="circuit"),
    CheckConstraint("char_length(endpoint) BETWEEN 1 AND 100", name="endpoint_length"),
    CheckConstraint("(paused_at IS NULL) = (paused_by IS NULL)", name="paused_pair"),
    CheckConstraint("paused_at IS NOT NULL OR pause_reason IS NULL", name="reason_while_paused"),
    CheckConstraint("char_length(pause_reason) <= 500", name="pause_reason_length"),
    CheckConstraint("(circuit = 'closed') = (next_probe_at IS NULL)", name="probe_while_not_closed"),
    CheckConstraint("(probe_owner IS NULL) = (probe_expires_at IS NULL)", name="probe_pair"),
    CheckConstraint("probe_owner IS NULL OR circuit = 'half_open'", name="probe_half_open"),
)

# Delivered rows counted as the relays record them (``lineup_relay_delivery_attempts_total`` is the
# same count per relay), so no reader has to count the delivered history. Several rows (``shard``,
# chosen by the writing backend) keep concurrent writers off one row; the total is their sum.
outbox_tallies = Table(
    "outbox_tallies",
    metadata,
    Column("shard", Integer, primary_key=True),
    Column("delivered", BigInteger, nullable=False, server_default=text("0")),
    CheckConstraint("shard BETWEEN 0 AND 63", name="shard_range"),
    CheckConstraint("delivered >= 0", name="delivered_nonnegative"),
)

# What the relays prune, as the last one to prune reported it (the settings are each relay's
# own environment): one row.
outbox_retention = Table(
    "outbox_retention",
    metadata,
    Column("id", Boolean, primary_key=True, server_default=text("true")),
    Column("delivered_days", Integer, nullable=False),
    Column("dead_days", Integer, nullable=False),
    Column("reported_by", Text, nullable=False),
    _ts("reported_at", default=True),
    _ts("last_pruned_at", nullable=True),
    Column("last_pruned_rows", BigInteger, nullable=False, server_default=text("0")),
    CheckConstraint("id", name="one_row"),
    CheckConstraint("delivered_days >= 1", name="delivered_days_positive"),
    CheckConstraint("dead_days >= 0", name="dead_days_nonnegative"),
)
