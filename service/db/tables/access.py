"""Who may act: a person's Host sessions, the SDK capabilities bound to an instance, and the
operator console's sign-ins."""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    LargeBinary,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, UUID

from service.db.tables.conventions import (
    metadata,
    timestamp,
)

# A person's session, minted by the trusted Host backend (HOST_TOKEN) and scoped to conversations.
host_sessions = Table(
    "host_sessions",
    metadata,
    Column("session_id", UUID(as_uuid=True), primary_key=True),
    Column("subject", Text, nullable=False),
    Column("conversation_ids", ARRAY(Text), nullable=True),
    timestamp("created_at", default=True),
    timestamp("expires_at"),
    timestamp("revoked_at", nullable=True),
    CheckConstraint("char_length(subject) BETWEEN 1 AND 255", name="subject_length"),
    CheckConstraint(
        "conversation_ids IS NULL OR cardinality(conversation_ids) BETWEEN 1 AND 1000",
        name="conversation_count",
    ),
    CheckConstraint("expires_at > created_at", name="expires_after_created"),
    Index("ix_host_sessions_expires_at", "expires_at"),
)


# SDK capabilities: random tokens, stored only as SHA-256 digests, bound to one instance.
capabilities = Table(
    "capabilities",
    metadata,
    Column("token_hash", LargeBinary, nullable=False),
    Column("instance_id", UUID(as_uuid=True), nullable=False),
    Column("app_scope", Text, nullable=False),
    Column("conversation_id", Text, nullable=False),
    timestamp("created_at", default=True),
    # The person's session it was minted under (NULL: HOST_TOKEN itself): it ends with that session.
    Column(
        "host_session_id",
        UUID(as_uuid=True),
        ForeignKey("host_sessions.session_id", ondelete="CASCADE"),
        nullable=True,
    ),
    PrimaryKeyConstraint("token_hash", "conversation_id"),
    ForeignKeyConstraint(
        ["instance_id", "conversation_id"], ["app_instances.instance_id", "app_instances.conversation_id"]
    ),
    CheckConstraint("octet_length(token_hash) = 32", name="token_hash_length"),
    Index("ix_capabilities_instance", "instance_id"),
    Index(
        "ix_capabilities_host_session_id",
        "host_session_id",
        postgresql_where=text("host_session_id IS NOT NULL"),
    ),
)


# The operator console's sign-ins: its signed cookie names one, and signing out ends it everywhere.
console_sessions = Table(
    "console_sessions",
    metadata,
    Column("session_id", UUID(as_uuid=True), primary_key=True),
    timestamp("created_at", default=True),
    timestamp("expires_at"),
    timestamp("revoked_at", nullable=True),
    CheckConstraint("expires_at > created_at", name="expires_after_created"),
    Index("ix_console_sessions_expires_at", "expires_at"),
)
