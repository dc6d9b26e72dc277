"""What the operator console's overview draws: the numbers of ``ops stats`` and the last hour,
minute by minute, read in one snapshot (``service.db.ops_queries.Lookup``).

Per minute: outbox rows created, and delivery attempts by outcome. Deadline lateness over the
operations completed in the last hour. Both bounded to the hour: rows are found through
``ix_outbox_status_created`` (every status named, so the index's leading column is fixed) and
attempts through ``ix_outbox_attempts_started_at``.
"""

from __future__ import annotations

from service.db import delivery as delivery_db
from service.db import ops_queries as ops_db
from service.db.ops_queries import Json, Lookup, Rows
from service.domain.timefmt import rfc3339

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


def overview() -> Lookup[Json]:
    """``stats``, the last hour, the delivery state and retention: ``{"stats", "last_hour":
    {"minutes", "deliveries", "failures", "lateness_ms"}, "delivery", "retention"}``. A failure is
    an attempt that did not deliver (retried or dead)."""
    stats = ops_db.stats()
    delivery = delivery_db.state_lookup()
    retention = delivery_db.retention_lookup()

    def shape(rows: Rows) -> Json:
        minutes = [
            {
                "at": rfc3339(row["minute"]),
                "created": row["created"],
                "delivered": row["delivered"],
                "failed": row["retried"] + row["dead"],
                "dead": row["dead"],
            }
            for row in rows["minutes"]
        ]
        return {
            "stats": stats.shape(rows),
            "last_hour": {
                "minutes": minutes,
                "deliveries": sum(m["delivered"] for m in minutes),
                "failures": sum(m["failed"] for m in minutes),
                "lateness_ms": dict(rows["lateness"][0]),
            },
            "delivery": delivery.shape(rows),
            "retention": retention.shape(rows),
        }

    statements = (
        *stats.statements,
        ("minutes", LAST_HOUR_BY_MINUTE),
        ("lateness", LATENESS_LAST_HOUR),
        *delivery.statements,
        *retention.statements,
    )
    return Lookup(statements, {"minutes": MINUTES, **delivery.params}, shape)
