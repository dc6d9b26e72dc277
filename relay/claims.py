"""Named statements on ``outbox``: claim under a lease, record an outcome only while holding it, release.

A claim is fenced by its ``lease_expires_at`` value: every claim writes a fresh one, so an outcome
write that carries an old value (its relay was paused, cut off or too slow) matches nothing and is
recorded as ``lease_lost`` instead of overwriting the row another relay now owns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from relay.policy import Verdict
from service.domain.delivery import AGENT_ENDPOINT

Conn = AsyncConnection[TupleRow]


def claim_columns(alias: str) -> str:
    """What a claim answers per row, in ``Claim``'s order."""
    names = "event_id, tool_call_id, conversation_id, sequence, attempts, created_at, lease_expires_at"
    return ", ".join(f"{alias}.{name}" for name in names.split(", ")) + f", {alias}.payload::text"


# A pending row under no live lease that heads its conversation's queue (its lowest sequence).
CLAIMABLE = """o.status = 'pending'
      AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= now())
      AND NOT EXISTS (
          SELECT 1 FROM outbox earlier
          WHERE earlier.conversation_id = o.conversation_id
            AND earlier.status = 'pending'
            AND earlier.sequence < o.sequence)"""

# A claim: a fresh lease (its expiry fences the outcome), and one more attempt counted.
LEASE = """lease_owner = %(relay_id)s,
    lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_seconds)s),
    attempts = o.attempts + 1"""

# Only the head of each conversation's pending queue (its lowest sequence) is claimable, and only
# when it is due and not under a live lease: a row waiting for its retry holds back its own
# conversation and nothing else, and a dead row (no longer pending) holds back nothing. SKIP LOCKED
# lets any number of relays claim at once; of two racing for one row, one skips it.
# Nothing is claimable while the endpoint is paused or its circuit is not closed (relay.circuit):
# the gate is read once per statement (its primary key), so held rows spend no attempts. A
# missing endpoint row holds nothing back. Each row also carries since when the circuit is closed.
CLAIM = f"""
WITH gate AS (
    SELECT e.paused_at IS NULL AND e.circuit = 'closed' AS open, e.circuit_since
    FROM delivery_endpoints e
    WHERE e.endpoint = %(endpoint)s
),
due AS (
    SELECT o.event_id
    FROM outbox o
    WHERE (SELECT open FROM gate) IS NOT FALSE
      AND {CLAIMABLE}
      AND o.next_attempt_at <= now()
      AND NOT (o.event_id = ANY(%(busy)s::uuid[]))
    ORDER BY o.next_attempt_at
    LIMIT %(limit)s
    FOR UPDATE OF o SKIP LOCKED
)
UPDATE outbox o
SET {LEASE}
FROM due
WHERE o.event_id = due.event_id
RETURNING {claim_columns("o")}, (SELECT circuit_since FROM gate)
"""

# The outcome lands only where this relay still holds the very lease it claimed; every attempt is
# appended to outbox_attempts either way. A failed probe gives its attempt back (``refund``);
# delivered rows are added to ``outbox_tallies``. One statement, its own transaction. Rows are
# locked in one order (``locked``, sorted by event_id, read before any row is updated) by every
# writer, so two writers recording overlapping batches (one of them late) cannot deadlock, and the
# attempt numbers below are computed under the lock. Re-running the statement after a lost commit reply is
# harmless: the attempt row (same relay, same start) exists and the lease is already gone.
RECORD_OUTCOMES = """
WITH v AS (
    SELECT * FROM unnest(
        %(event_ids)s::uuid[], %(leases)s::timestamptz[], %(verdicts)s::text[], %(delays)s::float8[],
        %(errors)s::text[], %(started_ats)s::timestamptz[], %(durations)s::int[],
        %(status_codes)s::int[], %(error_classes)s::text[], %(excerpts)s::text[],
        %(refunds)s::int[], %(conversations)s::text[])
        AS v(event_id, lease, verdict, delay, error, started_at, duration_ms, status_code, error_class,
             excerpt, refund, conversation_id)
),
locked AS MATERIALIZED (
    SELECT o.event_id FROM outbox o
    WHERE o.event_id = ANY(%(event_ids)s::uuid[])
    ORDER BY o.event_id
    FOR UPDATE
),
held AS (
    UPDATE outbox o
    SET status = CASE v.verdict WHEN 'retry' THEN 'pending' ELSE v.verdict END,
        delivered_at = CASE WHEN v.verdict = 'delivered' THEN now() END,
        next_attempt_at = CASE WHEN v.verdict = 'retry'
                               THEN now() + make_interval(secs => v.delay)
                               ELSE o.next_attempt_at END,
        last_error = CASE WHEN v.verdict = 'delivered' THEN o.last_error ELSE v.error END,
        attempts = o.attempts - v.refund,
        lease_owner = NULL,
        lease_expires_at = NULL
    FROM v JOIN locked l USING (event_id)
    WHERE o.event_id = v.event_id
      AND o.status = 'pending'
      AND o.lease_owner = %(relay_id)s
      AND o.lease_expires_at = v.lease
      AND o.lease_expires_at > now()
    RETURNING o.event_id, v.verdict
),
tally AS (
    INSERT INTO outbox_tallies AS t (shard, delivered)
    SELECT pg_backend_pid() %% 64, count(*) FROM held WHERE verdict = 'delivered' HAVING count(*) > 0
    ON CONFLICT (shard) DO UPDATE SET delivered = t.delivered + excluded.delivered
)
INSERT INTO outbox_attempts (event_id, conversation_id, attempt, relay_id, started_at, duration_ms,
                             status_code, error_class, response_excerpt, outcome)
SELECT v.event_id, v.conversation_id,
       coalesce((SELECT max(a.attempt) FROM outbox_attempts a WHERE a.event_id = v.event_id), 0) + 1,
       %(relay_id)s, v.started_at, v.duration_ms, v.status_code, v.error_class, v.excerpt,
       CASE WHEN v.event_id IN (SELECT event_id FROM held) THEN v.verdict ELSE 'lease_lost' END
FROM v JOIN locked l USING (event_id)
WHERE NOT EXISTS (
      SELECT 1 FROM outbox_attempts a
      WHERE a.event_id = v.event_id AND a.relay_id = %(relay_id)s AND a.started_at = v.started_at)
RETURNING event_id, outcome
"""

# Hands rows back without waiting for their leases to expire. ``uncount`` undoes the claim's
# increment of ``attempts`` for rows that were claimed but never sent.
RELEASE = """
UPDATE outbox
SET lease_owner = NULL, lease_expires_at = NULL, attempts = greatest(attempts - %(uncount)s, 0)
WHERE lease_owner = %(relay_id)s
  AND status = 'pending'
  AND NOT (event_id = ANY(%(keep)s::uuid[]))
RETURNING event_id
"""


# On Citus (a relay connected to a worker): the same claim and the same outcome writes on each shard
# of outbox that worker holds, one call each (service/db/sql/80_relay_nodes.sql), since FOR UPDATE
# ... SKIP LOCKED stays within one shard there.
CLAIM_ON_NODE = """
SELECT event_id, tool_call_id, conversation_id, sequence, attempts, created_at, lease_expires_at,
       payload, circuit_since
FROM relay_claim_local(%(relay_id)s, %(limit)s, %(lease_seconds)s, %(busy)s::uuid[], %(endpoint)s)
"""
RECORD_ON_NODE = """
SELECT event_id, outcome FROM relay_record_local(
    %(relay_id)s, %(event_ids)s::uuid[], %(conversations)s::text[], %(leases)s::timestamptz[],
    %(verdicts)s::text[], %(delays)s::float8[], %(errors)s::text[], %(started_ats)s::timestamptz[],
    %(durations)s::int[], %(status_codes)s::int[], %(error_classes)s::text[], %(excerpts)s::text[],
    %(refunds)s::int[])
"""


@dataclass(frozen=True, slots=True)
class Claim:
    event_id: UUID
    tool_call_id: str
    conversation_id: str
    sequence: int
    attempts: int
    created_at: datetime
    lease: datetime
    body: str
    #: The one row sent to test an open circuit (``relay.circuit``).
    probe: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    claim: Claim
    verdict: Verdict
    delay: float
    error: str | None
    started_at: datetime
    duration_ms: int
    status_code: int | None
    error_class: str | None
    excerpt: str | None
    #: 1 when a failed probe gives back the attempt its claim counted.
    refund: int = 0


class Claimed(list[Claim]):
    """The rows claimed, oldest first; and since when the endpoint's circuit is closed, as the
    claim read it (None with no rows, or with no endpoint row)."""

    circuit_closed_since: datetime | None = None


async def claim(
    conn: Conn,
    relay_id: str,
    limit: int,
    lease_seconds: float,
    busy: Sequence[UUID] = (),
    *,
    endpoint: str = AGENT_ENDPOINT,
    on_node: bool = False,
) -> Claimed:
    """``on_node``: on Citus, the rows of the shards the connection's node holds."""
    cursor = await conn.execute(
        CLAIM_ON_NODE if on_node else CLAIM,
        {
            "relay_id": relay_id,
            "limit": limit,
            "lease_seconds": lease_seconds,
            "busy": list(busy),
            "endpoint": endpoint,
        },
    )
    rows = await cursor.fetchall()
    claimed = Claimed(sorted((Claim(*row[:-1]) for row in rows), key=lambda c: c.created_at))
    claimed.circuit_closed_since = rows[0][-1] if rows else None
    return claimed


async def record_outcomes(
    conn: Conn, relay_id: str, outcomes: Sequence[Outcome], *, on_node: bool = False
) -> dict[UUID, str]:
    """Write a batch of outcomes in one statement; returns what was recorded per event (or lease_lost).
    ``on_node``: on Citus, each on the shard of the connection's node that holds it."""
    params = {
        "relay_id": relay_id,
        "event_ids": [o.claim.event_id for o in outcomes],
        "leases": [o.claim.lease for o in outcomes],
        "verdicts": [o.verdict for o in outcomes],
        "delays": [o.delay for o in outcomes],
        "errors": [o.error for o in outcomes],
        "started_ats": [o.started_at for o in outcomes],
        "durations": [o.duration_ms for o in outcomes],
        "status_codes": [o.status_code for o in outcomes],
        "error_classes": [o.error_class for o in outcomes],
        "excerpts": [o.excerpt for o in outcomes],
        "refunds": [o.refund for o in outcomes],
        "conversations": [o.claim.conversation_id for o in outcomes],
    }
    # Planned afresh each time (never a cached generic plan): the best way to look up earlier
    # attempts depends on how big outbox_attempts has grown, and its statistics may be stale.
    cursor = await conn.execute(RECORD_ON_NODE if on_node else RECORD_OUTCOMES, params, prepare=False)
    rows = await cursor.fetchall()
    return {row[0]: row[1] for row in rows}


async def release(conn: Conn, relay_id: str, *, keep: Sequence[UUID] = (), uncount: int = 0) -> list[UUID]:
    cursor = await conn.execute(RELEASE, {"relay_id": relay_id, "keep": list(keep), "uncount": uncount})
    return [row[0] for row in await cursor.fetchall()]
