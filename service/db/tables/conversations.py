"""What a conversation records: the answer to every tool call, its messages, the interactions
it asks a person, surface events and the projection changes its event stream pushes."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSON, JSONB, UUID

from service.db.tables.conventions import (
    metadata,
    timestamp,
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
    timestamp("created_at", default=True),
    CheckConstraint("char_length(tool_call_id) BETWEEN 1 AND 255", name="tool_call_id_length"),
    CheckConstraint("status_code BETWEEN 200 AND 599", name="status_code"),
    # BRIN: the operators' list of recent calls, at next to no cost per tool call.
    Index("ix_tool_calls_created_at", "created_at", postgresql_using="brin"),
    # The answers history retention has yet to expire, oldest first (migration 0015); an expired
    # row keeps its fingerprint and answers 410 tool_call_expired (service/db/sql/97_retention.sql).
    Index(
        "ix_tool_calls_answer_kept",
        "created_at",
        postgresql_where=text("status_code <> 410"),
    ),
)


# Surface events (dimmed, locked, reloaded, ...): recorded, never interrupting.
surface_events = Table(
    "surface_events",
    metadata,
    Column("surface_event_id", BigInteger, Identity(always=True), primary_key=True),
    Column("instance_id", UUID(as_uuid=True), ForeignKey("app_instances.instance_id"), nullable=False),
    Column("event", Text, nullable=False),
    timestamp("created_at", default=True),
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
    timestamp("created_at", default=True),
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
    timestamp("created_at", default=True),
    timestamp("answered_at", nullable=True),
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
    # History retention's order, and the interactions of a sub-session it removes (migration 0015).
    Index("ix_interactions_created_at", "created_at"),
    Index(
        "ix_interactions_sub_session",
        "asked_in_sub_session_id",
        postgresql_where=text("asked_in_sub_session_id IS NOT NULL"),
    ),
)

# The task id naming an interact.ask run as an MCP task: random, unlike the caller's tool_call_id.
interaction_tasks = Table(
    "interaction_tasks",
    metadata,
    Column("task_id", UUID(as_uuid=True), primary_key=True),
    Column("tool_call_id", Text, ForeignKey("interactions.tool_call_id"), nullable=False, unique=True),
    timestamp("created_at", default=True),
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
    timestamp("created_at", default=True),
    CheckConstraint("kind IN ('operation', 'workspace', 'message', 'interaction')", name="kind"),
    Index("ix_projection_events_conversation_seq", "conversation_id", "event_seq"),
)
