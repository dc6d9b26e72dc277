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

-- settle_focusing: ends the operations among p_operation_ids that are still focusing, with
-- p_state (p_reason) — or `completed` (deadline_reached) for any whose ends_at has passed: the
-- deadline is a fact of the database clock, whatever the caller asked for (p_only_due settles only
-- those). Only rows still focusing are touched, so of several concurrent callers exactly one gets a
-- row back. In the same transaction the winner closes the instance (close_instances: its
-- sub-session ends, its snapshot freezes, Interact is back in front) and queues the one outbox row
-- of the Tool call (queue_outbox). The caller holds the conversations' locks.
CREATE OR REPLACE FUNCTION settle_focusing(
    p_operation_ids uuid[], p_state text, p_reason text, p_only_due boolean DEFAULT false)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
DECLARE
    settled operations[];
BEGIN
    WITH decision AS (
        SELECT o.operation_id,
               CASE WHEN o.ends_at <= statement_timestamp() THEN 'completed' ELSE p_state END AS state,
               CASE WHEN o.ends_at <= statement_timestamp() THEN 'deadline_reached' ELSE p_reason END
                   AS reason
        FROM operations o
        WHERE o.operation_id = ANY(p_operation_ids)
          AND o.state = 'focusing'
          AND (NOT p_only_due OR o.ends_at <= statement_timestamp())
    ),
    decided AS (
        UPDATE operations o
        SET state = d.state,
            reason = d.reason,
            finalized_at = statement_timestamp(),
            result = jsonb_build_object(
                'state', d.state,
                'reason', d.reason,
                'activity', o.activity,
                'duration_seconds', o.duration_seconds,
                'started_at', rfc3339(o.started_at),
                'ends_at', rfc3339(o.ends_at),
                'finalized_at', rfc3339(statement_timestamp()),
                'focused_seconds', LEAST(
                    o.duration_seconds,
                    floor(EXTRACT(EPOCH FROM statement_timestamp() - o.started_at))::integer))
        FROM decision d
        WHERE o.operation_id = d.operation_id AND o.state = 'focusing'
        RETURNING o AS operation
    )
    SELECT array_agg(d.operation) INTO settled FROM decided d;
    IF settled IS NULL THEN
        RETURN;
    END IF;
    -- After the decision's own statement, so its event comes first in the conversation's stream.
    PERFORM close_instances(ARRAY(SELECT s.instance_id FROM unnest(settled) s), statement_timestamp());
    RETURN QUERY
    SELECT s.operation_id, s.conversation_id, s.instance_id, s.state, s.reason, s.ends_at,
           s.finalized_at, s.lateness_ms, q.event_id
    FROM unnest(settled) s
    JOIN queue_outbox(ARRAY(
        SELECT ROW(s.conversation_id, s.tool, s.tool_call_id, s.operation_id, s.result)::outbox_entry
        FROM unnest(settled) s)) q USING (tool_call_id);
END $$;

-- settle_due: the sweeper's batch — due operations whose conversation nobody else is changing right
-- now. It locks their workspaces rows (the lock every use case takes first), so it never deadlocks
-- with a request, and SKIP LOCKED lets several claimers, in one replica or many, settle side by
-- side without ever taking the same row.
CREATE OR REPLACE FUNCTION settle_due(p_limit integer)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT * FROM settle_focusing(ARRAY(
        SELECT o.operation_id
        FROM operations o
        JOIN workspaces w ON w.conversation_id = o.conversation_id
        WHERE o.state = 'focusing' AND o.ends_at <= statement_timestamp()
        ORDER BY o.ends_at
        LIMIT p_limit
        FOR UPDATE OF w SKIP LOCKED), 'completed', 'deadline_reached', true);
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
        RETURN QUERY SELECT * FROM settle_focusing(overdue, 'completed', 'deadline_reached', true);
    END IF;
END $$;
