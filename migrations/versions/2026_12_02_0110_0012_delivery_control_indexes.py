"""delivery control indexes: dead rows in conversation order, attempts by start time

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 01:10:00+00:00

Built CONCURRENTLY (outside a transaction), so that writers of ``outbox`` and ``outbox_attempts``
— tool calls, relays of either release — never wait for them however large the tables are. A
build that failed half-way leaves an invalid index behind; it is dropped and built again.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = {
    "ix_outbox_dead_conversation_sequence": ("ON outbox (conversation_id, sequence) WHERE status = 'dead'"),
    "ix_outbox_attempts_started_at": "ON outbox_attempts (started_at)",
}

INVALID = """
SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname = '{name}' AND NOT i.indisvalid
"""


def upgrade() -> None:
    with op.get_context().autocommit_block():
        connection = op.get_bind()
        for name, definition in INDEXES.items():
            if connection.exec_driver_sql(INVALID.format(name=name)).first() is not None:
                op.execute(f"DROP INDEX CONCURRENTLY {name}")
            op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {definition}")


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
