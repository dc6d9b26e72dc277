"""Every recorded tool call names its caller

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07 15:00:00+00:00

``tool_calls.caller`` (jsonb) says who made the call: ``{"kind": "agent"}`` for the Agent's token,
``{"kind": "person", "issuer", "subject", "client_id"}`` for a person's access token on ``/mcp``.
``call_tool_v3`` records what the service passes in its context (``"caller"``); the release before
this one passes none, and its calls — and every call recorded before — keep ``NULL``: not known.

Adding a nullable column without a default changes the catalog only (no row is rewritten), under
the table's lock taken with a short ``lock_timeout`` tried again until it is had, so the release
still serving waits for a moment instead of failing.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.db.migration_steps import lock_tables, own_connection

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with own_connection() as conn, conn.transaction():
        lock_tables(conn, ("tool_calls",))
        conn.execute("ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS caller jsonb")


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
