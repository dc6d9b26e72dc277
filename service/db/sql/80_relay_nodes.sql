-- The relay on Citus (docs/scaling.md): a claim with FOR UPDATE ... SKIP LOCKED must stay within one
-- shard, so a relay connects to a worker and works through the shards that worker holds, each a
-- plain table there: the statements below are the relay's own (relay/claims.py: CLAIM,
-- RECORD_OUTCOMES; relay/retention.py), run on each local shard in turn, in one call. On plain
-- PostgreSQL "the local shards" of a table are the table itself, so the same functions work there
-- too (and are tested there); the relay calls them only on Citus.

-- is_citus_table: whether Citus manages p_table (false on plain PostgreSQL, where its catalog is
-- absent: it is read only when it exists).
CREATE OR REPLACE FUNCTION is_citus_table(p_table regclass) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    found boolean;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)'
        INTO found USING p_table;
    RETURN found;
END $$;

-- local_shards: the tables that hold p_table's rows on this node: on plain PostgreSQL (or for a table
-- Citus does not manage) the table itself; on a Citus node, the shards of it placed here, in hash
-- order (none on a coordinator that holds no shard).
CREATE OR REPLACE FUNCTION local_shards(p_table regclass) RETURNS SETOF text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT is_citus_table(p_table) THEN
        RETURN NEXT p_table::text;
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT shard_name(s.logicalrelid, s.shardid)
         FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_dist_placement p USING (shardid)
         WHERE s.logicalrelid = $1 AND p.groupid = (SELECT groupid FROM pg_catalog.pg_dist_local_group)
         ORDER BY s.shardminvalue::bigint NULLS FIRST'
        USING p_table;
END $$;

-- shards_of: for each of p_values of p_table's distribution column, the table that holds its rows
-- (on plain PostgreSQL, or for a table Citus does not manage: the table itself), in one statement.
CREATE OR REPLACE FUNCTION shards_of(p_table regclass, p_values text[]) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    found text[];
BEGIN
    IF NOT is_citus_table(p_table) THEN
        RETURN array_fill(p_table::text, ARRAY[cardinality(p_values)]);
    END IF;
    EXECUTE 'SELECT array_agg(shard_name($1, get_shard_id_for_distribution_column($1, v)) ORDER BY n)
             FROM unnest($2) WITH ORDINALITY AS u(v, n)'
        INTO found USING p_table, p_values;
    RETURN found;
END $$;

-- relay_claim_local: the relay's claim (relay/claims.py, CLAIM) on each shard of outbox this node
-- holds, up to p_limit rows in all, starting at a shard of its own (p_relay_id's) so that relays of
-- one node spread over its shards: the head of each conversation's pending queue, due, under no
-- live lease, not among p_busy; nothing while the endpoint is paused or its circuit not closed. One
-- lease for the whole claim, taken before the statements (the SET holds no volatile function). Each
-- row with its trace context (migration 0026; a column added to the result breaks no caller: each
-- selects its columns by name).
CREATE OR REPLACE FUNCTION relay_claim_local(
    p_relay_id text, p_limit integer, p_lease_seconds double precision, p_busy uuid[], p_endpoint text)
RETURNS TABLE (event_id uuid, tool_call_id text, conversation_id text, sequence bigint,
               attempts integer, created_at timestamptz, lease_expires_at timestamptz, payload text,
               traceparent text, tracestate text, circuit_since timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    gate record;
    shards text[];
    shard text;
    first integer;
    left_to_claim integer := p_limit;
    claimed integer;
    lease timestamptz := clock_timestamp() + make_interval(secs => p_lease_seconds);
BEGIN
    EXECUTE format(
        'SELECT e.paused_at IS NULL AND e.circuit = ''closed'' AS open, e.circuit_since
         FROM %s e WHERE e.endpoint = $1',
        (SELECT s FROM local_shards('delivery_endpoints') s LIMIT 1))
        INTO gate USING p_endpoint;
    IF gate.open IS FALSE THEN
        RETURN;
    END IF;
    shards := ARRAY(SELECT local_shards('outbox'));
    IF cardinality(shards) = 0 THEN
        RETURN;
    END IF;
    first := abs(hashtext(p_relay_id)) % cardinality(shards);
    FOR i IN 0 .. cardinality(shards) - 1 LOOP
        EXIT WHEN left_to_claim <= 0;
        shard := shards[1 + (first + i) % cardinality(shards)];
        RETURN QUERY EXECUTE format(
            'WITH due AS (
                 SELECT o.event_id FROM %1$s o
                 WHERE o.status = ''pending''
                   AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= now())
                   AND NOT EXISTS (
                       SELECT 1 FROM %1$s earlier
                       WHERE earlier.conversation_id = o.conversation_id
                         AND earlier.status = ''pending''
                         AND earlier.sequence < o.sequence)
                   AND o.next_attempt_at <= now()
                   AND NOT (o.event_id = ANY($3))
                 ORDER BY o.next_attempt_at
                 LIMIT $2
                 FOR UPDATE OF o SKIP LOCKED)
             UPDATE %1$s o
             SET lease_owner = $1, lease_expires_at = $4, attempts = o.attempts + 1
             FROM due
             WHERE o.event_id = due.event_id
             RETURNING o.event_id, o.tool_call_id, o.conversation_id, o.sequence, o.attempts,
                       o.created_at, o.lease_expires_at, o.payload::text, o.traceparent,
                       o.tracestate, $5',
            shard)
            USING p_relay_id, left_to_claim, coalesce(p_busy, ARRAY[]::uuid[]), lease,
                  gate.circuit_since;
        GET DIAGNOSTICS claimed = ROW_COUNT;
        left_to_claim := left_to_claim - claimed;
    END LOOP;
END $$;

-- relay_record_local: the relay's outcome writes (relay/claims.py, RECORD_OUTCOMES), each on the
-- shard that holds its row (the conversation's), shard by shard in one call: the outcome lands only
-- where this relay still holds the lease it claimed, every attempt is appended (lease_lost when the
-- lease is gone), delivered rows are counted in a tally row of this node. Answers what it recorded.
-- A shard has no identity of its own: an attempt's id is drawn from outbox_attempts' identity (on
-- Citus, this node's range of it).
CREATE OR REPLACE FUNCTION relay_record_local(
    p_relay_id text, p_event_ids uuid[], p_conversations text[], p_leases timestamptz[],
    p_verdicts text[], p_delays double precision[], p_errors text[], p_started_ats timestamptz[],
    p_durations integer[], p_status_codes integer[], p_error_classes text[], p_excerpts text[],
    p_refunds integer[])
RETURNS TABLE (event_id uuid, outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    part record;
    tally_key integer;
    tally text;
BEGIN
    -- A row of outbox_tallies on this node (its key chosen by the backend, as the relay does), so
    -- that counting stays in this node's transaction; any row where none is here.
    SELECT k, t INTO tally_key, tally
    FROM unnest(shards_of('outbox_tallies', ARRAY(SELECT g::text FROM generate_series(0, 63) g)))
         WITH ORDINALITY AS u(t, n), LATERAL (SELECT (n - 1)::integer AS k) key
    WHERE t IN (SELECT local_shards('outbox_tallies'))
    ORDER BY (k + pg_backend_pid()) % 64
    LIMIT 1;
    IF tally IS NULL THEN
        tally_key := pg_backend_pid() % 64;
        tally := 'outbox_tallies';
    END IF;
    FOR part IN
        SELECT u.outbox_shard, u.attempts_shard, array_agg(u.n) AS positions
        FROM unnest(shards_of('outbox', p_conversations), shards_of('outbox_attempts', p_conversations))
             WITH ORDINALITY AS u(outbox_shard, attempts_shard, n)
        GROUP BY 1, 2
    LOOP
        RETURN QUERY EXECUTE format(
            'WITH v AS (
                 SELECT * FROM unnest($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
                     WITH ORDINALITY
                     AS v(event_id, conversation_id, lease, verdict, delay, error, started_at,
                          duration_ms, status_code, error_class, excerpt, refund, n)
                 WHERE v.n = ANY($14)
             ),
             locked AS MATERIALIZED (
                 SELECT o.event_id FROM %1$s o
                 WHERE o.event_id IN (SELECT v.event_id FROM v)
                 ORDER BY o.event_id
                 FOR UPDATE
             ),
             held AS (
                 UPDATE %1$s o
                 SET status = CASE v.verdict WHEN ''retry'' THEN ''pending'' ELSE v.verdict END,
                     delivered_at = CASE WHEN v.verdict = ''delivered'' THEN now() END,
                     next_attempt_at = CASE WHEN v.verdict = ''retry''
                                            THEN now() + make_interval(secs => v.delay)
                                            ELSE o.next_attempt_at END,
                     last_error = CASE WHEN v.verdict = ''delivered'' THEN o.last_error ELSE v.error END,
                     attempts = o.attempts - v.refund,
                     lease_owner = NULL,
                     lease_expires_at = NULL
                 FROM v JOIN locked l USING (event_id)
                 WHERE o.event_id = v.event_id
                   AND o.status = ''pending''
                   AND o.lease_owner = $1
                   AND o.lease_expires_at = v.lease
                   AND o.lease_expires_at > now()
                 RETURNING o.event_id, v.verdict
             ),
             counted AS (
                 INSERT INTO %3$s AS t (shard, delivered)
                 SELECT $15, count(*) FROM held WHERE verdict = ''delivered'' HAVING count(*) > 0
                 ON CONFLICT (shard) DO UPDATE SET delivered = t.delivered + excluded.delivered
             )
             INSERT INTO %2$s (attempt_id, event_id, conversation_id, attempt, relay_id, started_at,
                               duration_ms, status_code, error_class, response_excerpt, outcome)
             OVERRIDING SYSTEM VALUE
             SELECT nextval(pg_get_serial_sequence(''outbox_attempts'', ''attempt_id'')),
                    v.event_id, v.conversation_id,
                    coalesce((SELECT max(a.attempt) FROM %2$s a WHERE a.event_id = v.event_id), 0) + 1,
                    $1, v.started_at, v.duration_ms, v.status_code, v.error_class, v.excerpt,
                    CASE WHEN v.event_id IN (SELECT h.event_id FROM held h) THEN v.verdict
                         ELSE ''lease_lost'' END
             FROM v JOIN locked l USING (event_id)
             WHERE NOT EXISTS (
                   SELECT 1 FROM %2$s a
                   WHERE a.event_id = v.event_id AND a.relay_id = $1 AND a.started_at = v.started_at)
             RETURNING event_id, outcome',
            part.outbox_shard, part.attempts_shard, tally)
            USING p_relay_id, p_event_ids, p_conversations, p_leases, p_verdicts, p_delays, p_errors,
                  p_started_ats, p_durations, p_status_codes, p_error_classes, p_excerpts, p_refunds,
                  part.positions, tally_key;
    END LOOP;
END $$;

-- relay_prune_local: the relay's retention (relay/retention.py) on each shard of outbox this node
-- holds: delivered rows older than p_delivered_days, dead ones older than p_dead_days (0: kept), at
-- most p_limit of each kind per shard. Answers how many of each it removed.
CREATE OR REPLACE FUNCTION relay_prune_local(
    p_delivered_days integer, p_dead_days integer, p_limit integer,
    OUT delivered bigint, OUT dead bigint)
LANGUAGE plpgsql AS $$
DECLARE
    shard text;
    gone bigint;
BEGIN
    delivered := 0;
    dead := 0;
    FOR shard IN SELECT local_shards('outbox') LOOP
        EXECUTE format(
            'DELETE FROM %1$s WHERE event_id IN (
                 SELECT event_id FROM %1$s
                 WHERE status = ''delivered''
                   AND created_at < now() - make_interval(days => $1)
                   AND delivered_at < now() - make_interval(days => $1)
                 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)', shard)
            USING p_delivered_days, p_limit;
        GET DIAGNOSTICS gone = ROW_COUNT;
        delivered := delivered + gone;
        IF p_dead_days > 0 THEN
            EXECUTE format(
                'DELETE FROM %1$s WHERE event_id IN (
                     SELECT event_id FROM %1$s
                     WHERE status = ''dead'' AND created_at < now() - make_interval(days => $1)
                     ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)', shard)
                USING p_dead_days, p_limit;
            GET DIAGNOSTICS gone = ROW_COUNT;
            dead := dead + gone;
        END IF;
    END LOOP;
END $$;

-- The endpoint's circuit on Citus (relay/circuit.py: LOOK, TAKE_PROBE, CLOSE). The circuit is the
-- endpoint's row of delivery_endpoints, a reference table: every node reads its own copy, and a
-- change of it goes through Citus to every copy (the relay on a worker writes it as it would on one
-- primary). What the statements read or lock of outbox is read on this node's shards here, since
-- FOR UPDATE ... SKIP LOCKED stays within one shard.

-- relay_open_circuit: OPEN as Citus accepts it (no CASE over now() in an UPDATE of a Citus table):
-- closed -> open (the failures seen, or a Retry-After); an open circuit only has its next probe
-- pushed out by a Retry-After (p_extend). Answers the state before and since when it is open, or
-- nothing when nothing changed.
CREATE OR REPLACE FUNCTION relay_open_circuit(
    p_endpoint text, p_hold double precision, p_error text, p_extend boolean)
RETURNS TABLE (was text, circuit_since timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    before record;
    opens boolean;
    probe_at timestamptz;
BEGIN
    SELECT e.circuit, e.circuit_since, e.next_probe_at INTO before
    FROM delivery_endpoints e WHERE e.endpoint = p_endpoint FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    opens := before.circuit = 'closed';
    IF NOT (opens OR p_extend) THEN
        RETURN;
    END IF;
    probe_at := greatest(before.next_probe_at, now() + make_interval(secs => p_hold));
    IF opens THEN
        UPDATE delivery_endpoints e
        SET circuit = 'open', circuit_since = now(), next_probe_at = probe_at, last_error = p_error,
            updated_at = now()
        WHERE e.endpoint = p_endpoint;
        RETURN QUERY SELECT before.circuit, now();
    ELSE
        UPDATE delivery_endpoints e
        SET next_probe_at = probe_at, last_error = p_error, updated_at = now()
        WHERE e.endpoint = p_endpoint;
        RETURN QUERY SELECT before.circuit, before.circuit_since;
    END IF;
END $$;

-- relay_look_local: LOOK on this node: when its next pending row falls due, and the circuit's state.
CREATE OR REPLACE FUNCTION relay_look_local(p_endpoint text)
RETURNS TABLE (next_due_in double precision, paused boolean, circuit text, probe_in double precision,
               probing boolean)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    shard text;
    shard_next timestamptz;
    next_at timestamptz;
BEGIN
    FOR shard IN SELECT local_shards('outbox') LOOP
        EXECUTE format(
            'SELECT min(next_attempt_at) FROM %s WHERE status = ''pending'' AND next_attempt_at > now()',
            shard)
            INTO shard_next;
        next_at := least(next_at, shard_next);
    END LOOP;
    RETURN QUERY EXECUTE format(
        'SELECT EXTRACT(EPOCH FROM $2 - now())::float8,
                e.paused_at IS NOT NULL,
                coalesce(e.circuit, ''closed''),
                EXTRACT(EPOCH FROM e.next_probe_at - now())::float8,
                coalesce(e.probe_owner IS NOT NULL AND e.probe_expires_at > now(), false)
         FROM (VALUES (1)) AS one(x) LEFT JOIN %s e ON e.endpoint = $1',
        (SELECT s FROM local_shards('delivery_endpoints') s LIMIT 1))
        USING p_endpoint, next_at;
END $$;

-- relay_take_probe_local: TAKE_PROBE on this node. One relay of the cluster wins the probe (the
-- circuit not closed, not paused, its next probe due, no live probe) when this node has a pending
-- row under no live lease; the probe is the claimable row with the fewest attempts among the 64
-- waiting longest on this node's shards, then the one waiting longest, under the usual lease (one
-- value, taken before the statements, for the probe and its row). Answers won = 0 and no row when
-- it lost, won = 1 and no row when another relay took the row meanwhile (the caller hands the probe
-- back). The row comes with its trace context, as relay_claim_local's.
CREATE OR REPLACE FUNCTION relay_take_probe_local(
    p_relay_id text, p_lease_seconds double precision, p_endpoint text)
RETURNS TABLE (won integer, event_id uuid, tool_call_id text, conversation_id text, sequence bigint,
               attempts integer, created_at timestamptz, lease_expires_at timestamptz, payload text,
               traceparent text, tracestate text)
LANGUAGE plpgsql AS $$
DECLARE
    lease timestamptz := clock_timestamp() + make_interval(secs => p_lease_seconds);
    shards text[] := ARRAY(SELECT local_shards('outbox'));
    shard text;
    waiting boolean := false;
    changed integer;
    candidates text;
    candidate record;
BEGIN
    FOREACH shard IN ARRAY shards LOOP
        EXECUTE format(
            'SELECT EXISTS (SELECT 1 FROM %s o WHERE o.status = ''pending''
                            AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= now()))',
            shard)
            INTO waiting;
        EXIT WHEN waiting;
    END LOOP;
    IF NOT waiting THEN
        RETURN QUERY SELECT 0, NULL::uuid, NULL::text, NULL::text, NULL::bigint, NULL::integer,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::text, NULL::text;
        RETURN;
    END IF;
    UPDATE delivery_endpoints e
    SET circuit = 'half_open', probe_owner = p_relay_id, probe_expires_at = lease,
        last_probe_at = now(), updated_at = now()
    WHERE e.endpoint = p_endpoint
      AND e.paused_at IS NULL
      AND e.circuit <> 'closed'
      AND e.next_probe_at <= now()
      AND (e.probe_owner IS NULL OR e.probe_expires_at <= now());
    GET DIAGNOSTICS changed = ROW_COUNT;
    IF changed = 0 THEN
        RETURN QUERY SELECT 0, NULL::uuid, NULL::text, NULL::text, NULL::bigint, NULL::integer,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::text, NULL::text;
        RETURN;
    END IF;
    SELECT string_agg(format(
               '(SELECT o.event_id, o.attempts, o.next_attempt_at, %1$L::text AS shard FROM %1$s o
                 WHERE o.status = ''pending''
                   AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= now())
                   AND NOT EXISTS (
                       SELECT 1 FROM %1$s earlier
                       WHERE earlier.conversation_id = o.conversation_id
                         AND earlier.status = ''pending''
                         AND earlier.sequence < o.sequence)
                 ORDER BY o.next_attempt_at LIMIT 64)', s), ' UNION ALL ')
        INTO candidates
    FROM unnest(shards) AS s;
    FOR candidate IN EXECUTE
        'SELECT c.event_id, c.shard FROM (
             SELECT * FROM (' || candidates || ') every ORDER BY every.next_attempt_at LIMIT 64) c
         ORDER BY c.attempts, c.next_attempt_at'
    LOOP
        RETURN QUERY EXECUTE format(
            'WITH probe AS (
                 SELECT o.event_id FROM %1$s o
                 WHERE o.event_id = $1 AND o.status = ''pending''
                   AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= now())
                 FOR UPDATE SKIP LOCKED)
             UPDATE %1$s o
             SET lease_owner = $2, lease_expires_at = $3, attempts = o.attempts + 1
             FROM probe
             WHERE o.event_id = probe.event_id
             RETURNING 1, o.event_id, o.tool_call_id, o.conversation_id, o.sequence, o.attempts,
                       o.created_at, o.lease_expires_at, o.payload::text, o.traceparent, o.tracestate',
            candidate.shard)
            USING candidate.event_id, p_relay_id, lease;
        GET DIAGNOSTICS changed = ROW_COUNT;
        IF changed > 0 THEN
            RETURN;
        END IF;
    END LOOP;
    RETURN QUERY SELECT 1, NULL::uuid, NULL::text, NULL::text, NULL::bigint, NULL::integer,
                        NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::text, NULL::text;
END $$;

-- relay_close_local: CLOSE on this node: the probe this relay holds was answered, so the circuit
-- closes (through Citus, on every copy), and every pending row of the cluster waiting for its own
-- retry is made due at once (on one primary: the table; on Citus: every shard, as one statement
-- through Citus). Answers nothing when the probe was no longer this relay's.
CREATE OR REPLACE FUNCTION relay_close_local(p_endpoint text, p_relay_id text)
RETURNS TABLE (open_seconds double precision, circuit_since timestamptz, made_due bigint)
LANGUAGE plpgsql AS $$
DECLARE
    since timestamptz;
    due bigint;
BEGIN
    SELECT e.circuit_since INTO since FROM delivery_endpoints e
    WHERE e.endpoint = p_endpoint AND e.probe_owner = p_relay_id
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE delivery_endpoints e
    SET circuit = 'closed', circuit_since = now(), next_probe_at = NULL, probe_owner = NULL,
        probe_expires_at = NULL, last_error = NULL, updated_at = now()
    WHERE e.endpoint = p_endpoint;
    UPDATE outbox o SET next_attempt_at = now()
    WHERE o.status = 'pending' AND o.next_attempt_at > now();
    GET DIAGNOSTICS due = ROW_COUNT;
    RETURN QUERY SELECT EXTRACT(EPOCH FROM now() - since)::float8, now(), due;
END $$;
