"""The one query behind the outbox gauges that the service and every relay export.

``lineup_outbox_rows{status}`` and ``lineup_outbox_oldest_pending_age_seconds`` mean the same on
every process's /metrics because they come from this statement: one row per status (zero rows
included), with the age of that status's oldest row.
"""

from __future__ import annotations

OUTBOX_BY_STATUS = """
SELECT s.status, count(o.event_id)::bigint AS rows,
       coalesce(EXTRACT(EPOCH FROM now() - min(o.created_at)), 0)::float8 AS oldest_age_seconds
FROM (VALUES ('pending'), ('delivered'), ('dead')) AS s(status)
LEFT JOIN outbox o ON o.status = s.status
GROUP BY s.status
"""

FOCUSING_OPERATIONS = "SELECT count(*) AS focusing FROM operations WHERE state = 'focusing'"
