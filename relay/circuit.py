"""The endpoint's circuit: stop sending row by row when the Agent's endpoint fails as a whole.

The circuit is a row of ``delivery_endpoints``, so every relay and the console see one state, and
every change of it is a conditional UPDATE that one relay wins:

* **open**: a relay that sees ``failures`` endpoint failures in a row (connection errors, timeouts,
  408/429/3xx/5xx, with no 2xx or 4xx in between), or any answer with a ``Retry-After``, opens it.
  The claim (``relay.claims.CLAIM``) then hands out nothing, so rows wait without spending
  attempts;
* **half_open**: once ``next_probe_at`` has come, one relay (``TAKE_PROBE``) claims one pending row
  as the probe, the row with the fewest attempts first (so a row that keeps failing is not the
  probe each time). Its attempt is given back if the endpoint as a whole failed it
  (``is_endpoint_wide``: no answer, a redirect, 408, 429, 502, 503, 504 or a ``Retry-After``);
  an answer about the row itself (a 500, say) counts as the row's attempt, with its backoff, so a
  row the Agent keeps failing dies after ``max_attempts`` even when it is all that is pending;
* **closed** again when the probe is answered (2xx, or a 4xx: the endpoint is up, the row is what
  it rejects); every pending row waiting for its own retry is made due at once, and the other
  relays are woken. A failed probe opens it again until the next probe interval (or the
  ``Retry-After``) has passed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from relay.claims import (
    CLAIMABLE,
    LEASE,
    Claim,
    Claimed,
    Conn,
    claim,
    claim_columns,
    claim_from_row,
    claiming,
)
from relay.policy import AttemptResult, is_retryable_status
from service.wakeups import OUTBOX_CHANNEL

# Nothing for this relay to act on: only the age of the states matters to it.
LOOK = """
SELECT (SELECT EXTRACT(EPOCH FROM min(next_attempt_at) - now())::float8
        FROM outbox WHERE status = 'pending' AND next_attempt_at > now()) AS next_due_in,
       e.paused_at IS NOT NULL AS paused,
       coalesce(e.circuit, 'closed') AS circuit,
       EXTRACT(EPOCH FROM e.next_probe_at - now())::float8 AS probe_in,
       coalesce(e.probe_owner IS NOT NULL AND e.probe_expires_at > now(), false) AS probing
FROM (VALUES (1)) AS one(x)
LEFT JOIN delivery_endpoints e ON e.endpoint = %(endpoint)s
"""

# Marks the endpoint's row as known, whichever release migrated the database.
ENSURE = "INSERT INTO delivery_endpoints (endpoint) VALUES (%(endpoint)s) ON CONFLICT DO NOTHING"

# Closed -> open (the failures seen, or a Retry-After); an open circuit only has its next probe
# pushed out by a Retry-After. Answers the state before, so the relay that opened it knows.
OPEN = """
WITH before AS (
    SELECT circuit FROM delivery_endpoints WHERE endpoint = %(endpoint)s FOR UPDATE
)
UPDATE delivery_endpoints e
SET circuit = CASE WHEN b.circuit = 'closed' THEN 'open' ELSE e.circuit END,
    circuit_since = CASE WHEN b.circuit = 'closed' THEN now() ELSE e.circuit_since END,
    next_probe_at = greatest(e.next_probe_at, now() + make_interval(secs => %(hold)s)),
    last_error = %(error)s,
    updated_at = now()
FROM before b
WHERE e.endpoint = %(endpoint)s AND (b.circuit = 'closed' OR %(extend)s)
RETURNING b.circuit AS was, e.circuit_since
"""

# The probe is chosen among this many of the rows waiting longest: a long backlog costs a probe
# no more than a short one.
PROBE_CANDIDATES = 64

# One relay wins the probe: the circuit not closed, not paused, its next probe due, no live probe,
# and a row to probe with. The probe is the claimable row with the fewest attempts among the
# ``PROBE_CANDIDATES`` waiting longest, then the one waiting longest (its own retry time does not
# matter: the circuit holds every row), in its conversation's order, under the usual lease: a row
# that failed as a probe has one attempt more, so the next probe takes one that has not failed.
TAKE_PROBE = f"""
WITH won AS (
    UPDATE delivery_endpoints
    SET circuit = 'half_open', probe_owner = %(relay_id)s,
        probe_expires_at = clock_timestamp() + make_interval(secs => %(lease_seconds)s),
        last_probe_at = now(), updated_at = now()
    WHERE endpoint = %(endpoint)s
      AND paused_at IS NULL
      AND circuit <> 'closed'
      AND next_probe_at <= now()
      AND (probe_owner IS NULL OR probe_expires_at <= now())
      AND EXISTS (SELECT 1 FROM outbox
                  WHERE status = 'pending' AND (lease_expires_at IS NULL OR lease_expires_at <= now()))
    RETURNING endpoint
),
oldest AS (
    SELECT o.event_id
    FROM outbox o
    WHERE EXISTS (SELECT 1 FROM won)
      AND {CLAIMABLE}
    ORDER BY o.next_attempt_at
    LIMIT {PROBE_CANDIDATES}
),
probe AS (
    SELECT o.event_id
    FROM outbox o JOIN oldest USING (event_id)
    WHERE o.status = 'pending' AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= now())
    ORDER BY o.attempts, o.next_attempt_at
    LIMIT 1
    FOR UPDATE OF o SKIP LOCKED
),
claimed AS (
    UPDATE outbox o
    SET {LEASE}
    FROM probe
    WHERE o.event_id = probe.event_id
    RETURNING {claim_columns("o")}
)
SELECT (SELECT count(*) FROM won) AS won, c.*
FROM (VALUES (1)) AS one(x) LEFT JOIN claimed c ON true
"""

# Won the probe but found no row to send (another relay took it): hand the probe back.
RELEASE_PROBE = """
UPDATE delivery_endpoints
SET circuit = 'open', probe_owner = NULL, probe_expires_at = NULL, updated_at = now()
WHERE endpoint = %(endpoint)s AND probe_owner = %(relay_id)s
"""

# The probe was answered: closed, and every row waiting for its own retry is due now.
CLOSE = """
WITH before AS (
    SELECT circuit_since FROM delivery_endpoints
    WHERE endpoint = %(endpoint)s AND probe_owner = %(relay_id)s
    FOR UPDATE
),
closed AS (
    UPDATE delivery_endpoints e
    SET circuit = 'closed', circuit_since = now(), next_probe_at = NULL, probe_owner = NULL,
        probe_expires_at = NULL, last_error = NULL, updated_at = now()
    FROM before
    WHERE e.endpoint = %(endpoint)s
    RETURNING EXTRACT(EPOCH FROM now() - before.circuit_since)::float8 AS open_seconds, e.circuit_since
),
due AS (
    UPDATE outbox SET next_attempt_at = now()
    WHERE status = 'pending' AND next_attempt_at > now() AND EXISTS (SELECT 1 FROM closed)
    RETURNING 1
)
SELECT c.open_seconds, c.circuit_since, (SELECT count(*) FROM due) AS made_due FROM closed c
"""

# The probe failed: open again until the next probe.
REOPEN = """
UPDATE delivery_endpoints
SET circuit = 'open', next_probe_at = now() + make_interval(secs => %(hold)s), probe_owner = NULL,
    probe_expires_at = NULL, last_error = %(error)s, updated_at = now()
WHERE endpoint = %(endpoint)s AND probe_owner = %(relay_id)s
RETURNING circuit_since
"""

# After the close commits, so that idle relays start at once (never inside a transaction).
WAKE_RELAYS = f"SELECT pg_notify('{OUTBOX_CHANNEL}', '')"

# On Citus (a relay connected to a worker): LOOK, TAKE_PROBE and CLOSE as functions that read and
# lock outbox on the shards of the connection's node (service/db/sql/80_relay_nodes.sql), since
# FOR UPDATE ... SKIP LOCKED stays within one shard there; the circuit's row is the reference
# table's, one state for the cluster. RELEASE_PROBE and REOPEN touch only that row and run as
# they are; OPEN, whose CASE over now() Citus refuses, is ``relay_open_circuit``.
OPEN_ON_NODE = """
SELECT was, circuit_since FROM relay_open_circuit(%(endpoint)s, %(hold)s, %(error)s, %(extend)s)
"""
LOOK_ON_NODE = """
SELECT next_due_in, paused, circuit, probe_in, probing FROM relay_look_local(%(endpoint)s)
"""
TAKE_PROBE_ON_NODE = """
SELECT won, event_id, tool_call_id, conversation_id, sequence, attempts, created_at,
       lease_expires_at, payload, traceparent, tracestate
FROM relay_take_probe_local(%(relay_id)s, %(lease_seconds)s, %(endpoint)s)
"""
CLOSE_ON_NODE = """
SELECT open_seconds, circuit_since, made_due FROM relay_close_local(%(endpoint)s, %(relay_id)s)
"""


def is_endpoint_failure(result: AttemptResult) -> bool:
    """No answer, or an answer that says the endpoint (not the row) is in trouble."""
    return result.status_code is None or is_retryable_status(result.status_code)


# Answers that say nothing about the row sent: the endpoint (or the proxy in front of it) is down,
# overloaded or misconfigured. A 500 and other 5xx are the Agent failing that request.
_ENDPOINT_WIDE = frozenset({408, 429, 502, 503, 504})


def is_endpoint_wide(result: AttemptResult) -> bool:
    """A failure that is the endpoint's, not the row's: a failed probe with it spends no attempt."""
    code = result.status_code
    return code is None or result.retry_after is not None or 300 <= code < 400 or code in _ENDPOINT_WIDE


@dataclass
class FailureStreak:
    """Endpoint failures seen in a row by this relay, since the circuit last closed."""

    threshold: int
    failures: int = 0
    rows: set[UUID] = field(default_factory=set)
    closed_since: datetime | None = None

    def circuit_closed_at(self, since: datetime) -> None:
        """Failures of attempts started before the circuit last closed no longer count."""
        if self.closed_since is None or since > self.closed_since:
            self.closed_since = since
            self.reset()

    def reset(self) -> None:
        self.failures = 0
        self.rows.clear()

    def observe(self, event_id: UUID, started_at: datetime, result: AttemptResult) -> bool:
        """Count one answered or failed attempt; True when the streak is long enough to open."""
        if self.closed_since is not None and started_at < self.closed_since:
            return False
        if not is_endpoint_failure(result):
            self.reset()
            return False
        self.failures += 1
        self.rows.add(event_id)
        return self.failures >= self.threshold


@dataclass(frozen=True, slots=True)
class Look:
    next_due_in: float | None
    paused: bool
    circuit: str
    probe_in: float | None
    probing: bool

    @property
    def probe_due(self) -> bool:
        return (
            not self.paused
            and self.circuit != "closed"
            and not self.probing
            and self.probe_in is not None
            and self.probe_in <= 0
        )

    def wait(self, poll_interval: float) -> float:
        """How long to sleep before looking again (a NOTIFY may wake the relay sooner)."""
        if self.paused or self.probing:
            return poll_interval
        if self.circuit != "closed":
            return poll_interval if self.probe_in is None else min(poll_interval, max(self.probe_in, 0.005))
        if self.next_due_in is None:
            return poll_interval
        return min(poll_interval, max(self.next_due_in, 0.005))


async def look(conn: Conn, endpoint: str, *, on_node: bool = False) -> Look:
    """``on_node``: on Citus, the next row due among the shards of the connection's node."""
    cursor = await conn.execute(LOOK_ON_NODE if on_node else LOOK, {"endpoint": endpoint})
    row = await cursor.fetchone()
    assert row is not None
    return Look(*row)


async def claim_and_look(
    conn: Conn,
    relay_id: str,
    limit: int,
    lease_seconds: float,
    busy: Sequence[UUID] = (),
    *,
    endpoint: str,
) -> tuple[Claimed, Look]:
    """The claim (``relay.claims.claim``) and, in its transaction and round trip, the look that
    tells the claimer how long to wait when the claim was not full: one round trip where a claim
    that found fewer rows than it asked for made two. (The look sees the claim's own leases; they
    change no row's ``next_attempt_at``.)"""
    claimed = await claim(
        conn, relay_id, limit, lease_seconds, busy, endpoint=endpoint, then=(LOOK, {"endpoint": endpoint})
    )
    assert claimed.then is not None
    return claimed, Look(*claimed.then)


async def ensure(conn: Conn, endpoint: str) -> None:
    await conn.execute(ENSURE, {"endpoint": endpoint})


async def open_circuit(
    conn: Conn, endpoint: str, *, hold: float, error: str, extend: bool, on_node: bool = False
) -> tuple[str, datetime] | None:
    """Open (or, with ``extend``, hold an open circuit for ``hold`` more seconds); returns the
    state it was in and since when it is open, or None when nothing changed. ``on_node``: on
    Citus, through ``relay_open_circuit``."""
    params = {"endpoint": endpoint, "hold": hold, "error": error, "extend": extend}
    cursor = await conn.execute(OPEN_ON_NODE if on_node else OPEN, params)
    row = await cursor.fetchone()
    return None if row is None else (row[0], row[1])


async def take_probe(
    conn: Conn, endpoint: str, relay_id: str, lease_seconds: float, *, on_node: bool = False
) -> tuple[bool, Claim | None]:
    """(whether this relay won the probe, the row it claimed for it). ``on_node``: on Citus, a
    row of the shards of the connection's node."""
    claimed_at = time.monotonic()
    params = {"endpoint": endpoint, "relay_id": relay_id, "lease_seconds": lease_seconds}
    if on_node:
        cursor = await conn.execute(TAKE_PROBE_ON_NODE, params)
    else:
        async with claiming(conn):
            cursor = await conn.execute(TAKE_PROBE, params)
    row = await cursor.fetchone()
    assert row is not None
    won, *columns = row
    if not won or columns[0] is None:
        return bool(won), None
    return True, claim_from_row(columns, claimed_at, probe=True)


async def release_probe(conn: Conn, endpoint: str, relay_id: str) -> None:
    await conn.execute(RELEASE_PROBE, {"endpoint": endpoint, "relay_id": relay_id})


async def close(
    conn: Conn, endpoint: str, relay_id: str, *, on_node: bool = False
) -> tuple[float, datetime, int] | None:
    """(seconds it was open, since when it is closed, rows made due) — None if the probe was lost.
    ``on_node``: on Citus, through the function a worker runs (every shard's rows made due)."""
    statement = CLOSE_ON_NODE if on_node else CLOSE
    cursor = await conn.execute(statement, {"endpoint": endpoint, "relay_id": relay_id})
    row = await cursor.fetchone()
    if row is None:
        return None
    await conn.execute(WAKE_RELAYS)
    return float(row[0]), row[1], int(row[2])


async def reopen(conn: Conn, endpoint: str, relay_id: str, *, hold: float, error: str) -> bool:
    cursor = await conn.execute(
        REOPEN, {"endpoint": endpoint, "relay_id": relay_id, "hold": hold, "error": error}
    )
    return await cursor.fetchone() is not None
