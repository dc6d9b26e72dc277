"""An operation that ends in failure: the error it fails with

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-08 13:00:00+00:00

``operations.failure`` (jsonb, nullable): the error object (``{"code", "message"}``) an app's
decision gives its operation (service/db/sql/75_app_api.sql): ``app_fail_operation`` fails it at
once, ``app_fail_at_deadline`` has it fail when its deadline comes. A ``failed`` operation has one;
the row rules that say so (a state, a reason and the error's shape) are the ``operations_guard``
trigger's (service/db/sql/20_guards.sql), made here with the column, in its transaction (its text
names the column: migration 0024 makes the text it had before). They widen what is allowed:
nothing the release before writes is refused by them, and it never writes ``failed``
(docs/operations.md, "Upgrading").

Adding a nullable column without a default changes the catalog only (no row is rewritten); the table
is altered under its lock taken with a short ``lock_timeout`` tried again until it is had, so the
release still serving waits for a moment instead of failing. Every row before keeps ``NULL``.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.db.migration_steps import lock_tables, make_code, own_connection

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with own_connection() as conn, conn.transaction():
        lock_tables(conn, ("operations",))
        conn.execute("ALTER TABLE operations ADD COLUMN IF NOT EXISTS failure jsonb")
        # The guard as the file has it, which names the column (migration 0024 made it without).
        make_code(conn, [("function", "operations_guard")], citus_triggers=True)


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
