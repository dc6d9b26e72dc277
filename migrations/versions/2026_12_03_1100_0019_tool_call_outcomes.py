"""tool calls record their outcome word; HTTP statuses are named by the faces only

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03 11:00:00+00:00

``tool_calls.outcome`` is the word the decision answered with (``accepted``, ``interrupted``,
``operation_already_focusing``, ``idempotency_key_reused``, ``tool_call_expired``, …): what
``service.http`` maps to an HTTP status, through its kind, for REST, MCP and the operators' reads.
The rows recorded before it get theirs from their answer, where every answer names it
(``status``, or ``error`` for a refusal): the same word a replay of them has always reported, so
they keep replaying with the same status.

``status_code`` is kept, nullable, for the release before this one, which still reads it (its
operators' lists and traces) while both serve: this release's database code fills it for that
release's readers (``compat_status_code``, ``service/db/sql/99_compat.sql``); the contract release
drops it. The answers history retention has yet to expire are found by ``outcome`` from here on
(``ix_tool_calls_answer_kept``, re-made with that predicate).

One transaction with the database code that writes the column (``migrations/env.py``): no row is
written without its outcome between the two. The table is locked while its rows are completed and
the index re-made, so tool calls of the release still serving wait that long (an UPDATE of every
row: seconds for a million answers) instead of failing.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("LOCK TABLE tool_calls IN ACCESS EXCLUSIVE MODE")
    op.execute("ALTER TABLE tool_calls ADD COLUMN outcome text")
    op.execute("UPDATE tool_calls SET outcome = coalesce(response ->> 'status', response ->> 'error')")
    op.execute(
        "ALTER TABLE tool_calls ALTER COLUMN outcome SET NOT NULL, ALTER COLUMN status_code DROP NOT NULL"
    )
    op.execute(
        "ALTER TABLE tool_calls ADD CONSTRAINT ck_tool_calls_outcome_word"
        " CHECK (outcome ~ '^[a-z][a-z0-9_]{0,62}$')"
    )
    op.execute("DROP INDEX ix_tool_calls_answer_kept")
    op.execute(
        "CREATE INDEX ix_tool_calls_answer_kept ON tool_calls (created_at)"
        " WHERE outcome <> 'tool_call_expired'"
    )


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
