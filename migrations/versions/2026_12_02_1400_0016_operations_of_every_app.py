"""operations of every app: a conversation's focusing operations, whichever app's

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 14:00:00+00:00

Expand-only. The deadline rule of any request (``settle_if_overdue``) and the workspace's view now
find a conversation's focusing operations of every app, not only Pomodoro's (whose partial unique
index served them): a partial index of the focusing rows by conversation, built CONCURRENTLY
(outside a transaction), so that tool calls of either release never wait for it. A build that
failed half-way leaves an invalid index behind; it is dropped and built again.

In the same upgrade the database code (service/db/sql, service/apps/*/*.sql) gives every decision
one shape of effects (``decision_effects``) and ``call_tool_v3`` (interface 3); ``call_tool_v2``
stays, as a shim over it, for the release before this one.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = {
    "ix_operations_focusing_conversation": "ON operations (conversation_id) WHERE state = 'focusing'",
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
