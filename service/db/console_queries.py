"""What the operator console's overview draws: the numbers of ``ops stats`` and the last hour,
minute by minute, read in one snapshot (``service.db.ops_queries.Lookup``; its view is
``service.use_cases.ops_views.overview_view``).

Per minute: outbox rows created, and delivery attempts by outcome. Deadline lateness over the
operations completed in the last hour. Both bounded to the hour: rows are found through
``ix_outbox_status_created`` (every status named, so the index's leading column is fixed) and
attempts through ``ix_outbox_attempts_started_at``.
"""

from __future__ import annotations

from service.db import delivery as delivery_db
from service.db import ops_queries as ops_db
from service.db.ops_queries import Lookup

MINUTES = 60

LAST_HOUR_BY_MINUTE = """
WITH minutes AS (
    SELECT generate_series(date_trunc('minute', now()) - make_interval(mins => %(minutes)s - 1),
                           date_trunc('minute', now()), interval '1 minute') AS minute
),
created AS (
    SELECT date_trunc('minute', created_at) AS minute, count(*) AS rows
    FROM outbox
    WHERE status IN ('pending', 'delivered', 'dead')
      AND created_at >= date_trunc('minute', now()) - make_interval(mins => %(minutes)s - 1)
    GROUP BY 1
),
attempted AS (
    SELECT date_trunc('minute', started_at) AS minute,
           count(*) FILTER (WHERE outcome = 'delivered') AS delivered,
           count(*) FILTER (WHERE outcome = 'retry') AS retried,
           count(*) FILTER (WHERE outcome = 'dead') AS dead,
           count(*) FILTER (WHERE outcome = 'lease_lost') AS lease_lost
    FROM outbox_attempts
    WHERE started_at >= date_trunc('minute', now()) - make_interval(mins => %(minutes)s - 1)
    GROUP BY 1
)
SELECT m.minute, coalesce(c.rows, 0) AS created, coalesce(a.delivered, 0) AS delivered,
       coalesce(a.retried, 0) AS retried, coalesce(a.dead, 0) AS dead,
       coalesce(a.lease_lost, 0) AS lease_lost
FROM minutes m
LEFT JOIN created c ON c.minute = m.minute
LEFT JOIN attempted a ON a.minute = m.minute
ORDER BY m.minute
"""

LATENESS_LAST_HOUR = """
SELECT count(*) AS completed,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY lateness_ms) AS p50,
       percentile_disc(0.9) WITHIN GROUP (ORDER BY lateness_ms) AS p90,
       percentile_disc(0.99) WITHIN GROUP (ORDER BY lateness_ms) AS p99,
       max(lateness_ms) AS max
FROM operations
WHERE state = 'completed' AND finalized_at > now() - interval '1 hour'
"""


def overview() -> Lookup:
    """``stats``'s statements, the last hour by minute (``minutes``) and its deadline lateness
    (``lateness``), the delivery state and retention, in one snapshot."""
    last_hour = Lookup(
        (("minutes", LAST_HOUR_BY_MINUTE), ("lateness", LATENESS_LAST_HOUR)), {"minutes": MINUTES}
    )
    return ops_db.stats() + last_hour + delivery_db.state_lookup() + delivery_db.retention_lookup()
