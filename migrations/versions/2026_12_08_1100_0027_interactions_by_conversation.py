"""A conversation's questions in the order they were asked

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-08 11:00:00+00:00

``operation_status`` answers a conversation's latest long-running call, a question (``interact.ask``)
as well as an operation, in one statement; ``ix_interactions_conversation_created`` finds the
latest question, answered or not, without reading the conversation's others (``ix_interactions_pending``
holds the pending ones only).

Expand-only: the index is built CONCURRENTLY (outside a transaction), so that writers of
``interactions`` of either release never wait for it however large the table is. A build that
failed half-way leaves an invalid index behind; it is dropped and built again. The release before
reads nothing through it.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "ix_interactions_conversation_created"
DEFINITION = "ON interactions (conversation_id, created_at)"

INVALID = f"""
SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname = '{NAME}' AND NOT i.indisvalid
"""


def upgrade() -> None:
    with op.get_context().autocommit_block():
        if op.get_bind().exec_driver_sql(INVALID).first() is not None:
            op.execute(f"DROP INDEX CONCURRENTLY {NAME}")
        op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NAME} {DEFINITION}")


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
