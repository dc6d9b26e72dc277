"""Delivery: the outbox, its attempts, and what the relays share about the endpoint, the
delivered count and pruning."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKeyConstraint,
    Identity,
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
    ATTEMPT_OUTCOMES,
    CIRCUIT_STATES,
    OUTBOX_STATUSES,
    any_of,
    metadata,
    one_of,
    timestamp,
)

outbox = Table(
    "outbox",
    metadata,
    Column("event_id", UUID(as_uuid=True), nullable=False),
    Column("operation_id", UUID(as_uuid=True), nullable=True),
    Column("tool", Text, nullable=False),
    Column("tool_call_id", Text, nullable=False),
    Column("conversation_id", Text, nullable=False),
    # Per-conversation commit order: taken from workspaces.outbox_sequence under its row lock.
    Column("sequence", BigInteger, nullable=False),
    Column("status", Text, nullable=False, server_default=text("'pending'")),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    timestamp("next_attempt_at", default=True),
    Column("last_error", Text, nullable=True),
    timestamp("created_at", default=True),
    timestamp("delivered_at", nullable=True),
    Column("payload", JSONB, nullable=False),
    Column("lease_owner", Text, nullable=True),
    timestamp("lease_expires_at", nullable=True),
    # The W3C trace context of what produced the row (migration 0026): the call or the deadline
    # sweeper's settle in whose transaction it was queued, else the call that opened its operation.
    # Each delivery attempt's span links to it; a relay that does not trace forwards it to the Agent.
    Column("traceparent", Text, nullable=True),
    Column("tracestate", Text, nullable=True),
    PrimaryKeyConstraint("event_id", "conversation_id"),
    # At most one outbox row per tool call (of its conversation).
    UniqueConstraint("tool_call_id", "conversation_id"),
    ForeignKeyConstraint(
        ["operation_id", "conversation_id"], ["operations.operation_id", "operations.conversation_id"]
    ),
    CheckConstraint(any_of("status", OUTBOX_STATUSES), name="status"),
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
    # An operation's outbox rows: history retention removes its delivered ones with it, and keeps
    # it while one is pending or dead (migration 0015).
    Index(
        "ix_outbox_operation",
        "operation_id",
        postgresql_where=text("operation_id IS NOT NULL"),
    ),
)

outbox_attempts = Table(
    "outbox_attempts",
    metadata,
    Column("attempt_id", BigInteger, Identity(always=True), nullable=False),
    Column("event_id", UUID(as_uuid=True), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("relay_id", Text, nullable=False),
    timestamp("started_at"),
    Column("duration_ms", Integer, nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("error_class", Text, nullable=True),
    Column("response_excerpt", Text, nullable=True),
    Column("outcome", Text, nullable=False),
    Column("conversation_id", Text, nullable=False),
    PrimaryKeyConstraint("attempt_id", "conversation_id"),
    ForeignKeyConstraint(
        ["event_id", "conversation_id"], ["outbox.event_id", "outbox.conversation_id"], ondelete="CASCADE"
    ),
    CheckConstraint("attempt >= 1", name="attempt_positive"),
    CheckConstraint(one_of("outcome", ATTEMPT_OUTCOMES), name="outcome"),
    CheckConstraint("status_code IS NOT NULL OR error_class IS NOT NULL", name="has_result"),
    UniqueConstraint("event_id", "attempt", "conversation_id"),
    # The console's last hour, by minute (built CONCURRENTLY by migration 0012).
    Index("ix_outbox_attempts_started_at", "started_at"),
)


# Delivery control: one row per endpoint the relays deliver to (today only ``agent``). An
# operator's pause and the endpoint's circuit live here, so every relay and the console see them.
delivery_endpoints = Table(
    "delivery_endpoints",
    metadata,
    Column("endpoint", Text, primary_key=True),
    timestamp("paused_at", nullable=True),
    Column("paused_by", Text, nullable=True),
    Column("pause_reason", Text, nullable=True),
    Column("circuit", Text, nullable=False, server_default=text("'closed'")),
    timestamp("circuit_since", default=True),
    # While not closed: the earliest moment of the next probe (a Retry-After pushes it out).
    timestamp("next_probe_at", nullable=True),
    # The relay whose probe is in flight, until its lease expires.
    Column("probe_owner", Text, nullable=True),
    timestamp("probe_expires_at", nullable=True),
    timestamp("last_probe_at", nullable=True),
    Column("last_error", Text, nullable=True),
    timestamp("updated_at", default=True),
    CheckConstraint(one_of("circuit", CIRCUIT_STATES), name="circuit"),
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
    timestamp("reported_at", default=True),
    timestamp("last_pruned_at", nullable=True),
    Column("last_pruned_rows", BigInteger, nullable=False, server_default=text("0")),
    CheckConstraint("id", name="one_row"),
    CheckConstraint("delivered_days >= 1", name="delivered_days_positive"),
    CheckConstraint("dead_days >= 0", name="dead_days_nonnegative"),
)


# History retention (service/use_cases/history_retention.py), as the last replica to prune reported
# it: the period, what its last round removed and when. One row.
history_retention = Table(
    "history_retention",
    metadata,
    Column("id", Boolean, primary_key=True, server_default=text("true")),
    Column("retention_days", Integer, nullable=False),
    Column("reported_by", Text, nullable=False),
    timestamp("reported_at", default=True),
    timestamp("last_pruned_at", nullable=True),
    Column("last_pruned", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("total_pruned", BigInteger, nullable=False, server_default=text("0")),
    CheckConstraint("id", name="one_row"),
    CheckConstraint("retention_days >= 1", name="retention_days_positive"),
    CheckConstraint("jsonb_typeof(last_pruned) = 'object'", name="last_pruned_object"),
    CheckConstraint("total_pruned >= 0", name="total_pruned_nonnegative"),
)
