"""Named statements of delivery control: the endpoint's pause and circuit as operators see and set
them (``ops delivery``, ``/v1/ops/delivery``), and what retention keeps.

The relays read the same row in their claim (``relay.claims.CLAIM``) and change its circuit
(``relay.circuit``); an operator only pauses and resumes. A pause or a resume is one statement;
its caller wakes the relays after it has committed. Rows are answered as read; the ops views
(``service.use_cases.ops_views.delivery_view``) format them.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.db.ops_queries import Lookup
from service.domain.delivery import AGENT_ENDPOINT

_STATE = """
    d.paused_at IS NOT NULL AS paused, d.paused_at, d.paused_by, d.pause_reason AS reason,
    d.circuit, d.circuit_since, d.next_probe_at, d.last_probe_at, d.last_error"""
_COLUMNS = "d.endpoint," + _STATE

# A missing row (no relay started since the migration) reads as running, with no circuit (closed).
READ_STATE = f"""
SELECT e.endpoint,{_STATE}
FROM (VALUES (%(endpoint)s::text)) AS e(endpoint)
LEFT JOIN delivery_endpoints d ON d.endpoint = e.endpoint
"""

# Pausing a paused endpoint keeps when and by whom it was paused; a new reason replaces the old.
PAUSE = f"""
INSERT INTO delivery_endpoints AS d (endpoint, paused_at, paused_by, pause_reason)
VALUES (%(endpoint)s, now(), %(by)s, %(reason)s)
ON CONFLICT (endpoint) DO UPDATE
SET paused_at = coalesce(d.paused_at, now()),
    paused_by = coalesce(d.paused_by, excluded.paused_by),
    pause_reason = coalesce(excluded.pause_reason, d.pause_reason),
    updated_at = now()
RETURNING {_COLUMNS}
"""

RESUME = f"""
INSERT INTO delivery_endpoints AS d (endpoint) VALUES (%(endpoint)s)
ON CONFLICT (endpoint) DO UPDATE
SET paused_at = NULL, paused_by = NULL, pause_reason = NULL, updated_at = now()
RETURNING {_COLUMNS}
"""

# What the relays last reported, and the oldest row of each kind retention removes (the first
# entry of ix_outbox_status_created for each status: no scan of the history).
RETENTION = """
SELECT r.delivered_days, r.dead_days, r.reported_by, r.reported_at, r.last_pruned_at, r.last_pruned_rows,
       (SELECT min(created_at) FROM outbox WHERE status = 'delivered') AS oldest_delivered_at,
       (SELECT min(created_at) FROM outbox WHERE status = 'dead') AS oldest_dead_at
FROM (VALUES (true)) AS one(id)
LEFT JOIN outbox_retention r ON r.id = one.id
"""

# Every delivered row the relays recorded, kept or since pruned (``outbox_tallies``).
DELIVERED_TOTAL = "SELECT coalesce(sum(delivered), 0)::bigint AS delivered FROM outbox_tallies"


def state_lookup(endpoint: str = AGENT_ENDPOINT) -> Lookup:
    """The endpoint's pause and circuit (``delivery``), read in a snapshot with other statements."""
    return Lookup((("delivery", READ_STATE),), {"endpoint": endpoint})


def retention_lookup() -> Lookup:
    """What retention keeps and the oldest rows it will remove (``retention``)."""
    return Lookup((("retention", RETENTION),), {})


def _params(endpoint: str, **values: Any) -> dict[str, Any]:
    return {"endpoint": endpoint, **values}


def _one(row: DictRow | None) -> DictRow:
    assert row is not None  # an upsert always returns its row
    return row


async def pause(
    conn: AsyncConnection[DictRow], by: str, reason: str | None, endpoint: str = AGENT_ENDPOINT
) -> DictRow:
    cursor = await conn.execute(PAUSE, _params(endpoint, by=by, reason=reason))
    return _one(await cursor.fetchone())


async def resume(conn: AsyncConnection[DictRow], endpoint: str = AGENT_ENDPOINT) -> DictRow:
    """Resumed; the caller wakes the relays (``Wakeups.committed``)."""
    cursor = await conn.execute(RESUME, _params(endpoint))
    return _one(await cursor.fetchone())
