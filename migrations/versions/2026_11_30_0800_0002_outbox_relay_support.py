"""outbox relay support: wake-up notification, head-of-line index, operator view

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 08:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# One notification per inserting statement (not per row) wakes the relays.
NOTIFY_FUNCTION = """
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('lineup_outbox', '');
    RETURN NULL;
END
$$
"""

NOTIFY_TRIGGER = """
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify()
"""

# For someone at a psql prompt: one line per status with counts and ages.
OVERVIEW_VIEW = """
CREATE VIEW outbox_overview AS
SELECT status,
       count(*) AS rows,
       min(created_at) AS oldest_created_at,
       EXTRACT(EPOCH FROM now() - min(created_at))::bigint AS oldest_age_seconds,
       max(attempts) AS max_attempts,
       count(*) FILTER (WHERE lease_expires_at > now()) AS leased_now,
       count(*) FILTER (WHERE status = 'pending' AND next_attempt_at > now()) AS waiting_for_retry
FROM outbox
GROUP BY status
"""


def upgrade() -> None:
    op.execute(NOTIFY_FUNCTION)
    op.execute(NOTIFY_TRIGGER)
    op.create_index(
        "ix_outbox_pending_conversation_sequence",
        "outbox",
        ["conversation_id", "sequence"],
        postgresql_where="status = 'pending'",
    )
    op.execute(OVERVIEW_VIEW)


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
