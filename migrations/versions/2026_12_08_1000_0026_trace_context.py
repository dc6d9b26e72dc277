"""The W3C trace context of the call that produced a row, kept with it

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-08 10:00:00+00:00

``traceparent`` and ``tracestate`` (text, nullable) on three tables, so that a trace crosses the
outbox (docs/tracing-outbox.md):

- ``tool_calls``: the context of the call as the service received it (its span, when it traces);
- ``operations``: the start call's, which the deadline sweeper's settle links to;
- ``outbox``: the producing call's (or the sweeper's), which the relay's delivery spans link to and
  which it forwards to the Agent when it does not trace itself.

``call_tool_v3`` records what the service passes in its context (``"traceparent"``,
``"tracestate"``); the release before this one passes none, and its rows — and every row written
before — keep ``NULL``: no trace.

Adding a nullable column without a default changes the catalog only (no row is rewritten). Each
table is altered in a transaction of its own, under its lock taken with a short ``lock_timeout``
tried again until it is had, so the release still serving waits for a moment, one table at a time,
instead of failing.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.db.migration_steps import lock_tables, own_connection

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("operations", "outbox", "tool_calls")


def upgrade() -> None:
    for table in TABLES:
        with own_connection() as conn, conn.transaction():
            lock_tables(conn, (table,))
            conn.execute(
                f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS traceparent text,"
                " ADD COLUMN IF NOT EXISTS tracestate text"
            )


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
