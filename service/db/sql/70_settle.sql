-- Settling: the one compare-and-set every ending of an operation goes through, whichever app's —
-- the deadline (the sweeper, or any request arriving after it), the Agent's interrupt, the person
-- leaving the workspace, the app being closed.

-- One settled operation: what callers count, log and answer with.
CREATE TYPE settled_operation AS (
    operation_id uuid,
    conversation_id text,
    instance_id uuid,
    state text,
    reason text,
    ends_at timestamp with time zone,
    finalized_at timestamp with time zone,
    lateness_ms integer,
    event_id uuid
);

-- What a Tool's decision did besides its answer, in the one shape every decision returns (its OUT
-- effects; NULL when it did none of it): the operations it ended (settle_focusing's rows, any
-- number), the earliest deadline of the operations it opened, the instances it opened and those it
-- closed itself, and the outbox rows it queued itself (their event ids). call_tool_v3 hands them to
-- the service, which releases what they make known (counts, logs, wake-ups) after the commit.
CREATE TYPE decision_effects AS (
    settled settled_operation[],
    deadline timestamp with time zone,
    opened uuid[],
    closed uuid[],
    queued uuid[]
);

-- deadline_state: the state an operation ends in when its deadline is reached: `completed`, or
-- `failed` when its app's decision said it fails then (app_fail_at_deadline, 75_app_api.sql: its
-- error in `failure`). Either with the reason deadline_reached.
CREATE OR REPLACE FUNCTION deadline_state(o operations) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN o.failure IS NULL THEN 'completed' ELSE 'failed' END;

-- operation_json: an operation as JSON, built here for every SQL site that shows one, each its
-- own view of it: p_view 'answer', the operation a Tool's answer names (pomodoro_start's
-- "operation"); 'result', its outcome in the outbox (settle_focusing_v2, from the row as it is
-- decided); 'event', the Host's event stream (operations_guard). Ids as text, times RFC 3339
-- (rfc3339). Each caller names its view as a constant: the function is inlined and the CASE folded
-- when the caller's statement is planned, so a view costs about what building it in place did. jsonb
-- keeps its own key order (shortest first), whatever the order here. Python builds the REST and SDK
-- views itself: see README.md, "An operation's JSON".
CREATE OR REPLACE FUNCTION operation_json(o operations, p_view text) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE p_view
    WHEN 'answer' THEN jsonb_build_object(
        'operation_id', o.operation_id, 'state', o.state, 'activity', o.activity,
        'duration_seconds', o.duration_seconds, 'started_at', rfc3339(o.started_at),
        'ends_at', rfc3339(o.ends_at))
    WHEN 'result' THEN jsonb_build_object(
        'state', o.state, 'reason', o.reason, 'activity', o.activity,
        'duration_seconds', o.duration_seconds, 'started_at', rfc3339(o.started_at),
        'ends_at', rfc3339(o.ends_at), 'finalized_at', rfc3339(o.finalized_at),
        'focused_seconds', LEAST(o.duration_seconds,
                                 floor(EXTRACT(EPOCH FROM o.finalized_at - o.started_at))::integer))
        -- A failed operation's result also names its error (migration 0029); no other gains a key.
        -- (Read through to_jsonb: this text is made by migration 0021, before the column exists.)
        || CASE WHEN o.state = 'failed' THEN jsonb_build_object('error', to_jsonb(o) -> 'failure')
                ELSE '{}'::jsonb END
    WHEN 'event' THEN jsonb_build_object(
        'operation_id', o.operation_id, 'tool', o.tool, 'tool_call_id', o.tool_call_id,
        'instance_id', o.instance_id, 'state', o.state, 'reason', o.reason, 'activity', o.activity,
        'started_at', rfc3339(o.started_at), 'ends_at', rfc3339(o.ends_at),
        'finalized_at', rfc3339(o.finalized_at), 'result', o.result)
END;

-- settle_focusing_v2: ends the operations of the conversation among p_operation_ids that are still
-- focusing, with p_state (p_reason) — or `completed` (deadline_reached) for any whose ends_at has
-- passed (`failed` when its app said it fails then, deadline_state): the deadline is a fact of the database clock, whatever the caller asked for (p_only_due
-- settles only those). Only rows still focusing are touched, so of several concurrent callers
-- exactly one gets a row back. In the same transaction the winner closes the instance
-- (close_instances_v2: its sub-session ends, its snapshot freezes, Interact is back in front) and
-- queues the one outbox row of the Tool call (queue_outbox), with the trace context of the
-- transaction's producer (trace_producer, 60_outbox.sql: the call or the sweeper's settle that ends
-- it) or, when none said one, of the call that opened the operation. The caller holds the
-- conversation's lock. Every statement stays on the conversation's rows, and the UPDATE's SET holds only values
-- computed before it (Citus refuses a STABLE function over the row's columns, or any CASE over a
-- non-immutable one, in an UPDATE on a distributed table).
CREATE OR REPLACE FUNCTION settle_focusing_v2(
    p_conversation_id text, p_operation_ids uuid[], p_state text, p_reason text,
    p_only_due boolean DEFAULT false)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
DECLARE
    settled operations[];
    one operations;
    decided operations;
    decided_at timestamptz := statement_timestamp();
    closing uuid[];
    entries outbox_entry_v2[];
    closed integer;
    producer text;
    producer_state text;
BEGIN
    FOR decided IN
        SELECT o.* FROM operations o
        WHERE o.conversation_id = p_conversation_id AND o.operation_id = ANY(p_operation_ids)
          AND o.state = 'focusing' AND (NOT p_only_due OR o.ends_at <= decided_at)
    LOOP
        -- The row as it is decided, and its result (the outbox's payload) from it.
        IF decided.ends_at <= decided_at THEN
            decided.state := deadline_state(decided);
            decided.reason := 'deadline_reached';
        ELSE
            -- The caller's own ending: an app's decision ends only its own app's operations
            -- (75_app_api.sql); the deadline above is a fact, whoever finds it.
            IF decided.app_scope <> coalesce(acting_app(), decided.app_scope) THEN
                PERFORM refuse_other_app(decided.app_scope, format('operation %s', decided.operation_id));
            END IF;
            decided.state := p_state;
            decided.reason := p_reason;
        END IF;
        decided.finalized_at := decided_at;
        decided.result := operation_json(decided, 'result');
        UPDATE operations
        SET state = decided.state,
            reason = decided.reason,
            finalized_at = decided.finalized_at,
            result = decided.result
        WHERE conversation_id = p_conversation_id AND operation_id = decided.operation_id
          AND state = 'focusing'
        RETURNING * INTO one;
        IF FOUND THEN
            IF settled IS NULL THEN  -- read once, when there is something to queue
                producer := producer_traceparent();
                producer_state := CASE WHEN producer IS NOT NULL THEN producer_tracestate() END;
            END IF;
            -- What the closing and the outbox take, gathered here: assignments the function
            -- evaluates itself, where a subquery over unnest(settled) each was a plan of its own to
            -- start (about 50 k instructions a settling, bench/README.md).
            settled := settled || one;
            closing := closing || one.instance_id;
            entries := entries || ROW(one.conversation_id, one.tool, one.tool_call_id, one.operation_id,
                                      one.result, coalesce(producer, one.traceparent),
                                      CASE WHEN producer IS NULL THEN one.tracestate ELSE producer_state END
                                      )::outbox_entry_v2;
        END IF;
    END LOOP;
    IF settled IS NULL THEN
        RETURN;
    END IF;
    -- After the decision's own statement, so its event comes first in the conversation's stream.
    closed := close_instances_v2(p_conversation_id, closing, decided_at);
    -- queue_outbox answers its entries in their order, the settled operations' own: side by side.
    RETURN QUERY
    SELECT z.operation_id, z.conversation_id, z.instance_id, z.state, z.reason, z.ends_at,
           z.finalized_at, z.lateness_ms, z.event_id
    FROM ROWS FROM (unnest(settled), queue_outbox(entries)) z;
END $$;

-- claim_due: the sweeper's claim on one PostgreSQL — up to p_limit due operations, the most overdue
-- first, whose conversation nobody else is changing right now: it locks their workspaces rows (the
-- lock every use case takes first) for the caller's transaction, so it never deadlocks with a
-- request, and SKIP LOCKED lets several claimers, in one replica or many, claim side by side without
-- ever taking the same row. Each with the trace context of the call that opened it. (On Citus a lock
-- with SKIP LOCKED must stay in one shard: the sweeper finds the due conversations first and settles
-- each with settle_due_in, service/use_cases/deadlines.py.) Planned once, generically
-- (plan_cache_mode), as settle_claimed is: a custom plan for each p_limit always looked cheaper and
-- was made again at every call, about 1 M instructions a batch; the generic plan is the same walk of
-- ix_operations_focusing_ends_at, whatever the statistics say is due.
CREATE OR REPLACE FUNCTION claim_due(p_limit integer)
RETURNS TABLE (conversation_id text, operation_id uuid, traceparent text, tracestate text)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    SELECT o.conversation_id, o.operation_id, o.traceparent, o.tracestate
    FROM operations o
    JOIN workspaces w ON w.conversation_id = o.conversation_id
    WHERE o.state = 'focusing' AND o.ends_at <= statement_timestamp()
    ORDER BY o.ends_at
    LIMIT p_limit
    FOR UPDATE OF w SKIP LOCKED;
END $$;

-- settle_due: the sweeper's batch in one statement — what claim_due claims, settled by
-- settle_claimed with no trace context of its own (each outbox row carries its start call's).
CREATE OR REPLACE FUNCTION settle_due(p_limit integer)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
DECLARE
    claimed record;
BEGIN
    SELECT array_agg(c.conversation_id) AS conversation_ids, array_agg(c.operation_id) AS operation_ids
    INTO claimed FROM claim_due(p_limit) c;
    IF claimed.conversation_ids IS NOT NULL THEN
        RETURN QUERY SELECT * FROM settle_claimed(claimed.conversation_ids, claimed.operation_ids,
                                                  NULL, NULL);
    END IF;
END $$;

-- settle_claimed: the deadline rule for the operations the caller claimed (claim_due, in its own
-- transaction: it holds their conversations' locks), p_operation_ids[i] being p_conversation_ids[i]'s;
-- an operation no longer focusing is left as it is. p_traceparent and p_tracestate: the trace
-- context of the sweeper's settle (its span), which the outbox rows it queues carry
-- (trace_producer); NULL: none, each carries its start call's.
-- It decides as settle_focusing_v2 does and does what that function, close_instances_v2 and
-- queue_outbox do after the decision, with each statement over the whole batch instead of once per
-- conversation: the rows are read again under the locks, the one compare-and-set (UPDATE ... WHERE
-- state = 'focusing' RETURNING) decides, and only the rows it returned close their instance (its
-- sub-session ends, its snapshot freezes, Interact is back in front) and get their outbox row under
-- their conversation's next sequence number, in the caller's transaction. Settling conversation by
-- conversation cost each row about 2.0 M instructions, most of them the statements' start-up and
-- their CHECK constraints prepared again; over the batch about 1.1 M (`python -m
-- bench.db_instructions --settle`, bench/README.md). Data-modifying CTEs are fine here: Citus never
-- runs this function (settle_due_in settles there, conversation by conversation).
-- Each statement is planned once, generically (plan_cache_mode): a custom plan knows the length of
-- the batch's arrays, so it always looked cheaper than the generic one and was made again at every
-- call, which cost a batch of one row about 5 M instructions more (measured with an earlier form of
-- these statements). The generic plans join each array to its table's key, row by row.
CREATE OR REPLACE FUNCTION settle_claimed(
    p_conversation_ids text[], p_operation_ids uuid[], p_traceparent text, p_tracestate text)
RETURNS SETOF settled_operation
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    decided_at timestamptz := statement_timestamp();
    decided operations;
    decideds operations[];
    settled operations[];
    closed_conversations text[];
    closed_ids uuid[];
    producer text;
    producer_state text;
BEGIN
    IF p_conversation_ids IS NULL THEN
        RETURN;
    END IF;
    IF p_traceparent IS NOT NULL THEN
        PERFORM trace_producer(p_traceparent, p_tracestate);
    END IF;
    -- Each row as it is decided, read under the lock, and its result (the outbox's payload) from it.
    FOR decided IN
        SELECT o.* FROM operations o
        JOIN unnest(p_conversation_ids, p_operation_ids) AS d(conversation_id, operation_id)
          ON o.conversation_id = d.conversation_id AND o.operation_id = d.operation_id
        WHERE o.state = 'focusing' AND o.ends_at <= decided_at
    LOOP
        decided.state := deadline_state(decided);
        decided.reason := 'deadline_reached';
        decided.finalized_at := decided_at;
        decided.result := operation_json(decided, 'result');
        decideds := decideds || decided;
    END LOOP;
    IF decideds IS NULL THEN
        RETURN;
    END IF;
    -- The decision: only rows still focusing are touched.
    WITH won AS (
        UPDATE operations o
        SET state = d.state, reason = d.reason, finalized_at = d.finalized_at, result = d.result
        FROM unnest(decideds) d
        WHERE o.conversation_id = d.conversation_id AND o.operation_id = d.operation_id
          AND o.state = 'focusing'
        RETURNING o
    )
    SELECT array_agg(won.o) INTO settled FROM won;
    IF settled IS NULL THEN
        RETURN;
    END IF;
    producer := producer_traceparent();
    producer_state := CASE WHEN producer IS NOT NULL THEN producer_tracestate() END;
    -- close_instances_v2's work, after the decision (its events come first in each stream).
    WITH closed AS (
        UPDATE app_instances i SET status = 'closed', closed_at = decided_at
        FROM unnest(settled) s
        WHERE i.conversation_id = s.conversation_id AND i.instance_id = s.instance_id
          AND i.status = 'open'
        RETURNING i.conversation_id, i.instance_id
    )
    SELECT array_agg(c.conversation_id), array_agg(c.instance_id) INTO closed_conversations, closed_ids
    FROM closed c;
    IF closed_ids IS NOT NULL THEN
        UPDATE sub_sessions x SET status = 'ended', ended_at = decided_at
        FROM unnest(closed_conversations, closed_ids) AS c(conversation_id, instance_id)
        WHERE x.conversation_id = c.conversation_id AND x.instance_id = c.instance_id
          AND x.status = 'open';
        UPDATE instance_states x SET readonly = true, updated_at = decided_at
        FROM unnest(closed_conversations, closed_ids) AS c(conversation_id, instance_id)
        WHERE x.conversation_id = c.conversation_id AND x.instance_id = c.instance_id
          AND NOT x.readonly;
    END IF;
    -- The foreground handed back and queue_outbox's work in one write of each workspace: its
    -- sequence moves past the results it queues, numbered in the order of their deadlines; each
    -- row with the producer's trace context, or its start call's when none was said.
    RETURN QUERY
    WITH per_conversation AS (
        SELECT s.conversation_id, count(*) AS results,
               array_agg(s.instance_id) FILTER (WHERE s.instance_id = ANY(closed_ids)) AS closed
        FROM unnest(settled) s
        GROUP BY s.conversation_id
    ),
    numbered AS (
        UPDATE workspaces w
        SET outbox_sequence = w.outbox_sequence + p.results,
            foreground_instance_id = CASE WHEN w.foreground_instance_id = ANY(p.closed) THEN NULL
                                          ELSE w.foreground_instance_id END,
            updated_at = CASE WHEN w.foreground_instance_id = ANY(p.closed) THEN decided_at
                              ELSE w.updated_at END
        FROM per_conversation p
        WHERE w.conversation_id = p.conversation_id
        RETURNING w.conversation_id, w.outbox_sequence - p.results AS last_sequence
    ),
    entries AS (
        SELECT uuid_v7() AS event_id, s.operation_id, s.tool, s.tool_call_id, s.conversation_id,
               n.last_sequence + row_number() OVER (PARTITION BY s.conversation_id
                                                    ORDER BY s.ends_at, s.operation_id) AS sequence,
               s.result, coalesce(producer, s.traceparent) AS traceparent,
               CASE WHEN producer IS NULL THEN s.tracestate ELSE producer_state END AS tracestate
        FROM unnest(settled) s JOIN numbered n USING (conversation_id)
    ),
    queued AS (
        INSERT INTO outbox AS o (event_id, operation_id, tool, tool_call_id, conversation_id, sequence,
                                 payload, traceparent, tracestate)
        SELECT e.event_id, e.operation_id, e.tool, e.tool_call_id, e.conversation_id, e.sequence,
               jsonb_build_object(
                   'event_id', e.event_id, 'type', 'tool.result', 'tool', e.tool,
                   'tool_call_id', e.tool_call_id, 'conversation_id', e.conversation_id,
                   'operation_id', e.operation_id, 'sequence', e.sequence,
                   'result', e.result),
               e.traceparent, e.tracestate
        FROM entries e
        RETURNING o.operation_id, o.event_id
    )
    SELECT s.operation_id, s.conversation_id, s.instance_id, s.state, s.reason, s.ends_at,
           s.finalized_at, s.lateness_ms, q.event_id
    FROM unnest(settled) s JOIN queued q USING (operation_id);
END $$;

-- settle_due_in: the sweeper's settling of one conversation found due (on Citus, run on the worker
-- holding the conversation): its lock if nobody holds it (SKIP LOCKED, in one shard), then the
-- deadline rule. Nothing when another holder has it: that one settles what is due itself (every
-- request applies the deadline rule), or the next round does.
CREATE OR REPLACE FUNCTION settle_due_in(p_conversation_id text)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM workspaces WHERE conversation_id = p_conversation_id FOR NO KEY UPDATE SKIP LOCKED;
    IF FOUND THEN
        RETURN QUERY SELECT * FROM settle_if_overdue(p_conversation_id);
    END IF;
END $$;

-- settle_due_in_traced: settle_due_in with the trace context of the sweeper's settle (its span), which
-- the outbox rows it queues carry (trace_producer); on Citus, delegated whole to the worker holding
-- the conversation, as settle_due_in is.
CREATE OR REPLACE FUNCTION settle_due_in_traced(
    p_conversation_id text, p_traceparent text, p_tracestate text)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
BEGIN
    IF p_traceparent IS NOT NULL THEN
        PERFORM trace_producer(p_traceparent, p_tracestate);
    END IF;
    RETURN QUERY SELECT * FROM settle_due_in(p_conversation_id);
END $$;

-- settle_if_overdue: the deadline rule for any request that touches a conversation: each of its
-- focusing operations, of any app, is settled `completed` first if its ends_at has passed. The
-- caller holds the lock.
CREATE OR REPLACE FUNCTION settle_if_overdue(p_conversation_id text)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
DECLARE
    overdue uuid[];
BEGIN
    SELECT array_agg(o.operation_id) INTO overdue FROM operations o
    WHERE o.conversation_id = p_conversation_id AND o.state = 'focusing'
      AND o.ends_at <= statement_timestamp();
    IF overdue IS NOT NULL THEN
        RETURN QUERY SELECT * FROM settle_focusing_v2(p_conversation_id, overdue, 'completed',
                                                      'deadline_reached', true);
    END IF;
END $$;
