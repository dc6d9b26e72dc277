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

Its own transaction, committed before the database code is applied (``migrations/env.py``), as
0018's: the table is locked while its rows are completed and the index re-made (an UPDATE of every
row: tool calls of the release still serving wait that long), and only that long — calls held
behind a lock until the new database code commits would then run the old code's text against it.
Between the two commits the release before runs its own ``call_tool_v3``, which writes no outcome:
the compatibility triggers of ``99_compat.sql`` (made here, as that file held them until migration
0023 dropped them with ``status_code``) give it the word its answer names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from service.db.migration_steps import lock_tables, own_connection

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The database code the release before needs while it runs on the new shape, as
#: service/db/sql/99_compat.sql held it until migration 0023 dropped it (kept here as it was, since
#: a migration is history): a row recorded or expired without its outcome gets its answer's word.
COMPAT_CODE = (
    """
CREATE OR REPLACE FUNCTION compat_outcome_of_answer() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.outcome := coalesce(NEW.response ->> 'status', NEW.response ->> 'error');
    RETURN NEW;
END $$""",
    """
CREATE OR REPLACE TRIGGER compat_tool_calls_outcome BEFORE INSERT ON tool_calls
FOR EACH ROW WHEN (NEW.outcome IS NULL) EXECUTE FUNCTION compat_outcome_of_answer()""",
    """
CREATE OR REPLACE TRIGGER compat_tool_calls_expired_outcome BEFORE UPDATE OF response ON tool_calls
FOR EACH ROW WHEN (NEW.outcome IS NOT DISTINCT FROM OLD.outcome) EXECUTE FUNCTION compat_outcome_of_answer()""",
)

STATEMENTS = (
    "ALTER TABLE tool_calls ADD COLUMN outcome text",
    "UPDATE tool_calls SET outcome = coalesce(response ->> 'status', response ->> 'error')",
    "ALTER TABLE tool_calls ALTER COLUMN outcome SET NOT NULL, ALTER COLUMN status_code DROP NOT NULL,"
    " ADD CONSTRAINT ck_tool_calls_outcome_word CHECK (outcome ~ '^[a-z][a-z0-9_]{0,62}$')",
    "DROP INDEX ix_tool_calls_answer_kept",
    "CREATE INDEX ix_tool_calls_answer_kept ON tool_calls (created_at) WHERE outcome <> 'tool_call_expired'",
)


def _record_outcomes(conn: psycopg.Connection[Any]) -> None:
    for statement in STATEMENTS:
        conn.execute(statement)
    conn.execute("SET LOCAL check_function_bodies = off")
    for statement in COMPAT_CODE:
        conn.execute(statement)


def upgrade() -> None:
    with own_connection() as conn, conn.transaction():
        # The table, under a short lock_timeout tried again until it is had (as 0018 locks its tables).
        lock_tables(conn, ("tool_calls",))
        _record_outcomes(conn)


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
