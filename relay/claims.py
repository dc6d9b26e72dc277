"""Named statements on ``outbox``: claim under a lease, record an outcome only while holding it, release.

A claim is fenced by its ``lease_expires_at`` value: every claim writes a fresh one, so an outcome
write that carries an old value (its relay was paused, cut off or too slow) matches nothing and is
recorded as ``lease_lost`` instead of overwriting the row another relay now owns.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb

from relay.policy import Verdict
from service.domain.delivery import AGENT_ENDPOINT

Conn = AsyncConnection[TupleRow]
_encode = msgspec.json.Encoder().encode


def claim_columns(alias: str) -> str:
    """What a claim answers per row, in ``Claim``'s order."""
    names = "event_id, tool_call_id, conversation_id, sequence, attempts, created_at, lease_expires_at"
    return (
        ", ".join(f"{alias}.{name}" for name in names.split(", "))
        + f", {alias}.payload::text, {alias}.traceparent, {alias}.tracestate"
    )


# A pending row under no live lease that heads its conversation's queue (its lowest sequence):
# the conversation's first pending row in sequence order, which the index on (conversation_id,
# sequence) of pending rows gives at once. Run under ``HEAD_BY_INDEX`` (``claiming``), so that no
# plan reads it any other way.
CLAIMABLE = """o.status = 'pending'
      AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= now())
      AND o.event_id = (
          SELECT head.event_id FROM outbox head
          WHERE head.conversation_id = o.conversation_id
            AND head.status = 'pending'
          ORDER BY head.sequence
          LIMIT 1)"""

# Statistics taken while few rows were pending (the usual state) make the planner believe the
# pending rows' partial indexes empty; once a backlog builds (an endpoint outage), it then found
# each row's head by scanning every pending row (ix_outbox_due, or (status, created_at)), once per
# candidate row: a 10,000-row backlog took ~1 ms per row claimed instead of ~0.1 ms. Without
# sorts, the one plan left for ``CLAIMABLE``'s ordered lookup is that index. For the claiming
# transaction only (``is_local``); the claim itself sorts nothing (ix_outbox_due gives its order).
# A plan that still sorts (the probe's pick, ``TAKE_PROBE``) carries the disabled sort's cost of
# 10^10, far past ``jit_above_cost``: Postgres then compiled it with LLVM at every call, ~300 ms for
# a statement that runs in 2 ms, which spaced an open circuit's probes ~0.5 s apart where the probe
# interval asked for 0.2 s. So JIT is off for the same transaction.
HEAD_BY_INDEX = "SELECT set_config('enable_sort', 'off', true), set_config('jit', 'off', true)"

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
# delivered rows are added to ``outbox_tallies``. One statement, its own transaction. The batch
# comes as one JSON array of rows (``outcome_rows``: one parameter, encoded in C, instead of eleven
# arrays adapted element by element). Rows are locked in one order (``locked``, sorted by
# event_id, all of it read — count(*) — before any row is updated) by every writer, so two writers
# recording overlapping batches (one of them late) cannot deadlock, and the attempt numbers below
# are computed under the lock. Re-running the statement after a lost commit reply is harmless: the
# attempt row (same relay, same start) exists (``prior.seen``) and the lease is already gone.
# Each row's earlier attempts are read by one index range scan (``prior``, an aggregate over
# ``uq_outbox_attempts_event_id_attempt``), a shape no planner statistics turn into a scan of the
# whole table: so the statement may be prepared once, as the claim is.
RECORD_OUTCOMES = """
WITH v AS MATERIALIZED (
    SELECT (r->>0)::uuid AS event_id, (r->>1)::timestamptz AS lease, r->>2 AS verdict,
           (r->>3)::float8 AS delay, r->>4 AS error, (r->>5)::timestamptz AS started_at,
           (r->>6)::int AS duration_ms, (r->>7)::int AS status_code, r->>8 AS error_class,
           r->>9 AS excerpt, (r->>10)::int AS refund, r->>11 AS conversation_id
    FROM jsonb_array_elements(%(outcomes)s::jsonb) AS r
),
locked AS MATERIALIZED (
    SELECT o.event_id FROM outbox o
    WHERE o.event_id IN (SELECT event_id FROM v)
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
    FROM v
    WHERE o.event_id = v.event_id
      AND (SELECT count(*) FROM locked) > 0
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
SELECT v.event_id, v.conversation_id, coalesce(prior.last, 0) + 1, %(relay_id)s, v.started_at,
       v.duration_ms,
       v.status_code, v.error_class, v.excerpt,
       CASE WHEN v.event_id IN (SELECT event_id FROM held) THEN v.verdict ELSE 'lease_lost' END
FROM v
JOIN locked l USING (event_id)
CROSS JOIN LATERAL (
    SELECT max(a.attempt) AS last,
           coalesce(bool_or(a.relay_id = %(relay_id)s AND a.started_at = v.started_at), false) AS seen
    FROM outbox_attempts a
    WHERE a.event_id = v.event_id
) prior
WHERE NOT prior.seen
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


# On Citus (a relay connected to a worker): the claim and the outcome writes on each shard of outbox
# that worker holds, one call each (service/db/sql/80_relay_nodes.sql), since FOR UPDATE ... SKIP
# LOCKED stays within one shard there.
CLAIM_ON_NODE = """
SELECT event_id, tool_call_id, conversation_id, sequence, attempts, created_at, lease_expires_at,
       payload, traceparent, tracestate, circuit_since
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
    #: The stored payload as the Agent receives it (UTF-8), the same bytes on every attempt.
    body: bytes
    #: The one row sent to test an open circuit (``relay.circuit``).
    probe: bool = False
    #: ``time.monotonic()`` just before the claim was made: its lease lasts at least
    #: ``lease_seconds`` from then.
    claimed_at: float = 0.0
    #: The W3C trace context of what produced the row (``outbox.traceparent``, ``.tracestate``;
    #: ``service.trace_context``): each attempt's span links to it.
    traceparent: str | None = None
    tracestate: str | None = None


def claim_from_row(row: Sequence[Any], claimed_at: float, *, probe: bool = False) -> Claim:
    """A ``Claim`` from the first columns of a row in ``claim_columns``' order."""
    event_id, tool_call_id, conversation_id, sequence, attempts, created_at, lease, payload = row[:8]
    traceparent, tracestate = row[8:10]
    return Claim(
        event_id,
        tool_call_id,
        conversation_id,
        sequence,
        attempts,
        created_at,
        lease,
        payload.encode(),
        probe,
        claimed_at,
        traceparent,
        tracestate,
    )


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
    #: The first row of the statement ``claim`` ran after the claim (``then``), if any.
    then: tuple[Any, ...] | None = None


async def claim(
    conn: Conn,
    relay_id: str,
    limit: int,
    lease_seconds: float,
    busy: Sequence[UUID] = (),
    *,
    endpoint: str = AGENT_ENDPOINT,
    on_node: bool = False,
    then: tuple[str, Mapping[str, Any]] | None = None,
) -> Claimed:
    """Claim up to ``limit`` rows under a lease of ``lease_seconds``. ``busy``: rows this relay
    still holds whose lease may have run out, which it must not claim again. ``on_node``: on
    Citus, the rows of the shards the connection's node holds. ``then``: a statement (and its
    parameters) run after the claim in its transaction and round trip (not ``on_node``): its
    first row is ``Claimed.then``."""
    claimed_at = time.monotonic()
    params = {
        "relay_id": relay_id,
        "limit": limit,
        "lease_seconds": lease_seconds,
        "busy": list(busy),
        "endpoint": endpoint,
    }
    following = None
    if on_node:
        if then is not None:
            raise ValueError("a claim on a node runs nothing after it")
        cursor = await conn.execute(CLAIM_ON_NODE, params)
    else:
        async with claiming(conn):
            cursor = await conn.execute(CLAIM, params)
            if then is not None:
                following = await conn.execute(*then)
    rows = await cursor.fetchall()
    rows.sort(key=_created_at)
    claimed = Claimed(claim_from_row(row, claimed_at) for row in rows)
    claimed.circuit_closed_since = rows[0][-1] if rows else None
    if following is not None:
        claimed.then = await following.fetchone()
    return claimed


@contextlib.asynccontextmanager
async def claiming(conn: Conn) -> AsyncIterator[None]:
    """A transaction under ``HEAD_BY_INDEX``, its statements pipelined (one round trip). It commits
    durably (the session's ``synchronous_commit``, on): its lease must survive a crash, or a stale
    POST could land after the conversation's next result (docs/design.md, "Why the relay's claim
    waits for its WAL flush"; ``REVERT_CLAIM_WITHOUT_FLUSH`` in model/relay.pml)."""
    async with conn.pipeline(), conn.transaction():
        await conn.execute(HEAD_BY_INDEX)
        yield


def _created_at(row: Sequence[Any]) -> datetime:
    created_at: datetime = row[5]
    return created_at


def outcome_rows(outcomes: Sequence[Outcome]) -> list[tuple[Any, ...]]:
    """``RECORD_OUTCOMES``' batch, one array per outcome in the statement's order (sent as JSON)."""
    return [
        (
            o.claim.event_id,
            o.claim.lease,
            o.verdict,
            o.delay,
            o.error,
            o.started_at,
            o.duration_ms,
            o.status_code,
            o.error_class,
            o.excerpt,
            o.refund,
            o.claim.conversation_id,
        )
        for o in outcomes
    ]


async def record_outcomes(
    conn: Conn, relay_id: str, outcomes: Sequence[Outcome], *, on_node: bool = False
) -> dict[UUID, str]:
    """Write a batch of outcomes in one statement; returns what was recorded per event (or lease_lost).
    ``on_node``: on Citus, each on the shard of the connection's node that holds it."""
    if on_node:
        cursor = await conn.execute(RECORD_ON_NODE, _outcome_arrays(relay_id, outcomes))
    else:
        params = {"relay_id": relay_id, "outcomes": Jsonb(outcome_rows(outcomes), dumps=_encode)}
        cursor = await conn.execute(RECORD_OUTCOMES, params)
    rows = await cursor.fetchall()
    return {row[0]: row[1] for row in rows}


def _outcome_arrays(relay_id: str, outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """``RECORD_ON_NODE``'s parameters: one array per column."""
    return {
        "relay_id": relay_id,
        "event_ids": [o.claim.event_id for o in outcomes],
        "conversations": [o.claim.conversation_id for o in outcomes],
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
    }


async def release(conn: Conn, relay_id: str, *, keep: Sequence[UUID] = (), uncount: int = 0) -> list[UUID]:
    cursor = await conn.execute(RELEASE, {"relay_id": relay_id, "keep": list(keep), "uncount": uncount})
    return [row[0] for row in await cursor.fetchall()]
