"""The queries behind the gauges that the service and every relay export, the same on each.

None of them reads the delivered history: pending and dead rows are few by nature and are counted
through indexes that hold them (``ix_outbox_due``, ``ix_outbox_status_created``), so one sample
costs the backlog, never the history. Delivered totals are counters instead:
``lineup_relay_delivery_attempts_total{outcome="delivered"}`` per relay, ``outbox_tallies`` in the
database.
"""

from __future__ import annotations

OUTBOX_BACKLOG = """
SELECT (SELECT count(*) FROM outbox WHERE status = 'pending')::bigint AS pending,
       (SELECT count(*) FROM outbox WHERE status = 'dead')::bigint AS dead,
       coalesce(EXTRACT(EPOCH FROM now() - (SELECT min(created_at) FROM outbox WHERE status = 'pending')),
                0)::float8 AS oldest_pending_age_seconds
"""

# One row per endpoint: whether an operator paused it and for how long, and its circuit.
DELIVERY_STATE = """
SELECT endpoint, paused_at IS NOT NULL AS paused,
       coalesce(EXTRACT(EPOCH FROM now() - paused_at), 0)::float8 AS paused_seconds,
       circuit, circuit <> 'closed' AS circuit_open
FROM delivery_endpoints
"""

# With the database's clock at the moment, against which serve measures its host's (service.clock).
FOCUSING_OPERATIONS = (
    "SELECT count(*) AS focusing, extract(epoch FROM clock_timestamp())::float8 AS database_now"
    " FROM operations WHERE state = 'focusing'"
)
