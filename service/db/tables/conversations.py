"""What a conversation records: the answer to every tool call, its messages, the interactions
it asks a person, surface events and the projection changes its event stream pushes."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSON, JSONB, UUID

from service.db.tables.conventions import (
    any_of,
    metadata,
    timestamp,
)

# The idempotency record of every answered tool call (401/404/422 are not recorded).
tool_calls = Table(
    "tool_calls",
    metadata,
    Column("tool_call_id", Text, nullable=False),
    Column("conversation_id", Text, nullable=False),
    Column("tool", Text, nullable=False),
    Column("fingerprint", Text, nullable=False),
    # json, not jsonb: a replay returns the first answer with its keys in their original order.
    Column("response", JSON, nullable=False),
    timestamp("created_at", default=True),
    # The word the decision answered with (its "status", or "error" for a refusal): the faces name
    # its HTTP status (service.http). (Until migration 0023 the row also kept an HTTP status,
    # status_code, for the releases before migration 0019.)
    Column("outcome", Text, nullable=False),
    # Who made the call (migration 0025): {"kind": "agent"}, or {"kind": "person", "issuer",
    # "subject", "client_id"} for a person's token on /mcp; NULL when recorded before, or by the
    # release before (service.use_cases.callers).
    Column("caller", JSONB, nullable=True),
    # The W3C trace context of the call as the service received it (migration 0026): what its span
    # was when it traces, so the console and a trace backend find each other; NULL when it does
    # not, or for the release before (service.trace_context).
    Column("traceparent", Text, nullable=True),
    Column("tracestate", Text, nullable=True),
    # Unique per conversation (the contract's "Past one primary"): the same id in another
    # conversation is another call.
    PrimaryKeyConstraint("tool_call_id", "conversation_id"),
    CheckConstraint("char_length(tool_call_id) BETWEEN 1 AND 255", name="tool_call_id_length"),
    # An outcome word, ^[a-z][a-z0-9_]{0,62}$, stated as a length and ^[a-z][a-z0-9_]*$: the same
    # rule, where the bounded repetition builds a 62-state automaton at every match (about 30 k
    # instructions a tool call, bench/README.md).
    CheckConstraint("char_length(outcome) <= 63 AND outcome ~ '^[a-z][a-z0-9_]*$'", name="outcome_word"),
    # BRIN: the operators' list of recent calls, at next to no cost per tool call.
    Index("ix_tool_calls_created_at", "created_at", postgresql_using="brin"),
    # The answers history retention has yet to expire, oldest first (migrations 0015, 0019); an
    # expired row keeps its fingerprint and answers tool_call_expired (service/db/sql/97_retention.sql).
    Index(
        "ix_tool_calls_answer_kept",
        "created_at",
        postgresql_where=text("outcome <> 'tool_call_expired'"),
    ),
)


# Surface events (dimmed, locked, reloaded, ...): recorded, never interrupting.
surface_events = Table(
    "surface_events",
    metadata,
    Column("surface_event_id", BigInteger, Identity(always=True), nullable=False),
    Column("instance_id", UUID(as_uuid=True), nullable=False),
    Column("event", Text, nullable=False),
    timestamp("created_at", default=True),
    Column("conversation_id", Text, nullable=False),
    PrimaryKeyConstraint("surface_event_id", "conversation_id"),
    ForeignKeyConstraint(
        ["instance_id", "conversation_id"], ["app_instances.instance_id", "app_instances.conversation_id"]
    ),
    CheckConstraint("event IN ('dimmed', 'undimmed', 'locked', 'unlocked', 'reloaded')", name="event"),
    Index("ix_surface_events_instance", "instance_id", "created_at"),
)

# The main conversation (sub_session_id NULL) and each app sub-session keep their messages apart.
messages = Table(
    "messages",
    metadata,
    Column("message_id", UUID(as_uuid=True), nullable=False),
    Column("conversation_id", Text, ForeignKey("workspaces.conversation_id"), nullable=False),
    Column("sub_session_id", UUID(as_uuid=True), nullable=True),
    Column("role", Text, nullable=False),
    Column("text", Text, nullable=False),
    timestamp("created_at", default=True),
    PrimaryKeyConstraint("message_id", "conversation_id"),
    ForeignKeyConstraint(
        ["sub_session_id", "conversation_id"], ["sub_sessions.sub_session_id", "sub_sessions.conversation_id"]
    ),
    CheckConstraint("role IN ('user', 'agent')", name="role"),
    CheckConstraint("char_length(text) BETWEEN 1 AND 8000", name="text_length"),
    Index("ix_messages_conversation_created", "conversation_id", "created_at"),
    Index("ix_messages_sub_session_created", "sub_session_id", "created_at"),
)

# Interact standard interactions (interact.ask): owned by the conversation, decided once.
interactions = Table(
    "interactions",
    metadata,
    Column("tool_call_id", Text, nullable=False),
    Column("conversation_id", Text, ForeignKey("workspaces.conversation_id"), nullable=False),
    Column("prompt", Text, nullable=False),
    Column("choices", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("status", Text, nullable=False, server_default=text("'pending'")),
    Column("asked_in_sub_session_id", UUID(as_uuid=True), nullable=True),
    Column("answer", Text, nullable=True),
    timestamp("created_at", default=True),
    timestamp("answered_at", nullable=True),
    # An app's question of its own forms (app_ask, migration 0028); NULL on interact.ask's: the
    # Tool that asked, its forms {key: {message, requestedSchema}} and the answers so far {key: content}.
    Column("tool", Text, nullable=True),
    Column("forms", JSONB, nullable=True),
    Column("answers", JSONB, nullable=True),
    PrimaryKeyConstraint("tool_call_id", "conversation_id"),
    ForeignKeyConstraint(
        ["asked_in_sub_session_id", "conversation_id"],
        ["sub_sessions.sub_session_id", "sub_sessions.conversation_id"],
    ),
    CheckConstraint("status IN ('pending', 'answered')", name="status"),
    CheckConstraint(
        "(status = 'answered') = (answer IS NOT NULL AND answered_at IS NOT NULL)", name="answered"
    ),
    CheckConstraint("char_length(prompt) BETWEEN 1 AND 2000", name="prompt_length"),
    CheckConstraint("jsonb_typeof(choices) = 'array'", name="choices_array"),
    CheckConstraint("forms IS NULL OR jsonb_typeof(forms) = 'object'", name="forms_object"),
    CheckConstraint("(forms IS NULL) = (tool IS NULL)", name="form_tool"),
    CheckConstraint("answers IS NULL OR forms IS NOT NULL", name="answers_of_forms"),
    Index(
        "ix_interactions_pending",
        "conversation_id",
        "created_at",
        postgresql_where=text("status = 'pending'"),
    ),
    # A conversation's latest question, answered or not: operation_status (migration 0027).
    Index("ix_interactions_conversation_created", "conversation_id", "created_at"),
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
    Column("task_id", UUID(as_uuid=True), nullable=False),
    Column("tool_call_id", Text, nullable=False),
    timestamp("created_at", default=True),
    Column("conversation_id", Text, nullable=False),
    PrimaryKeyConstraint("task_id", "conversation_id"),
    UniqueConstraint("tool_call_id", "conversation_id"),
    ForeignKeyConstraint(
        ["tool_call_id", "conversation_id"], ["interactions.tool_call_id", "interactions.conversation_id"]
    ),
)

# Projection changes for the Host's event stream; written by triggers in the deciding
# transactions, announced with NOTIFY, replayed after a reconnect from Last-Event-ID. ``event_seq``
# is the conversation's own sequence, taken by project() under the conversation's lock (migration
# 0018): it increases in commit order within the conversation, wherever its rows live.
projection_events = Table(
    "projection_events",
    metadata,
    Column("event_seq", BigInteger, nullable=False),
    Column("conversation_id", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("payload", JSONB, nullable=False),
    timestamp("created_at", default=True),
    PrimaryKeyConstraint("conversation_id", "event_seq"),
    CheckConstraint(any_of("kind", ("operation", "workspace", "message", "interaction")), name="kind"),
)
