-- The outbox: the one way a Tool result enters it, and what an operator sees at a psql prompt.

-- The trace context of what produces rows in a transaction: the W3C traceparent and tracestate of
-- the Tool call (call_tool_v3, from what the service passes: service/trace_context.py) or of the
-- deadline sweeper's settle (settle_claimed, settle_due_in_traced), kept for the transaction
-- (set_config's is_local) where every row it writes finds it: the operation a call opens
-- (app_open_operation) and each outbox row it queues. Not every writer says one (the release
-- before migration 0026, a process that does not trace, the person's requests): then NULL.

-- trace_producer: the transaction's producer is p_traceparent (and p_tracestate, NULL when it has
-- none) from here to its end.
CREATE OR REPLACE FUNCTION trace_producer(p_traceparent text, p_tracestate text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('lineup.traceparent', coalesce(p_traceparent, ''), true),
            set_config('lineup.tracestate', coalesce(p_tracestate, ''), true);
END $$;

-- producer_traceparent: the transaction's producer's traceparent (trace_producer), NULL when none
-- was said (an unset setting reads as NULL, a reset one as '').
CREATE OR REPLACE FUNCTION producer_traceparent() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN nullif(current_setting('lineup.traceparent', true), '');

-- producer_tracestate: its tracestate, NULL when it has none.
CREATE OR REPLACE FUNCTION producer_tracestate() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN nullif(current_setting('lineup.tracestate', true), '');

-- One Tool result to queue, with the trace context it carries (NULL: none). (outbox_entry, its
-- shape before migration 0026, had no trace context: a type never changes in place.)
CREATE TYPE outbox_entry_v2 AS (
    conversation_id text,
    tool text,
    tool_call_id text,
    operation_id uuid,
    result jsonb,
    traceparent text,
    tracestate text
);

-- queue_outbox: each entry becomes one pending row under its conversation's next sequence number
-- (the relay delivers a conversation's rows in that order), its payload being exactly what the
-- relay POSTs, and its trace context beside it (never in the payload: the relay's delivery spans
-- link to it). At most one entry per conversation per call; the caller holds their locks. Answers
-- each entry's tool_call_id with the event_id it was given.
CREATE OR REPLACE FUNCTION queue_outbox(p_entries outbox_entry_v2[])
RETURNS TABLE (tool_call_id text, event_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    entry outbox_entry_v2;
    next_sequence bigint;
BEGIN
    -- One entry at a time, each statement on its conversation's rows only (no data-modifying CTE:
    -- Citus would plan one with intermediate results sent between its nodes).
    FOREACH entry IN ARRAY p_entries LOOP
        UPDATE workspaces w SET outbox_sequence = w.outbox_sequence + 1
        WHERE w.conversation_id = entry.conversation_id
        RETURNING w.outbox_sequence INTO next_sequence;
        tool_call_id := entry.tool_call_id;
        event_id := uuid_v7();
        INSERT INTO outbox AS o (event_id, operation_id, tool, tool_call_id, conversation_id, sequence,
                                 payload, traceparent, tracestate)
        VALUES (queue_outbox.event_id, entry.operation_id, entry.tool, entry.tool_call_id,
                entry.conversation_id, next_sequence,
                jsonb_build_object(
                    'event_id', queue_outbox.event_id, 'type', 'tool.result', 'tool', entry.tool,
                    'tool_call_id', entry.tool_call_id, 'conversation_id', entry.conversation_id,
                    'operation_id', entry.operation_id, 'sequence', next_sequence,
                    'result', entry.result),
                entry.traceparent, entry.tracestate);
        RETURN NEXT;
    END LOOP;
END $$;

-- For someone at a psql prompt: one line per status with counts and ages.
CREATE OR REPLACE VIEW outbox_overview AS
SELECT status,
       count(*) AS rows,
       min(created_at) AS oldest_created_at,
       EXTRACT(EPOCH FROM now() - min(created_at))::bigint AS oldest_age_seconds,
       max(attempts) AS max_attempts,
       count(*) FILTER (WHERE lease_expires_at > now()) AS leased_now,
       count(*) FILTER (WHERE status = 'pending' AND next_attempt_at > now()) AS waiting_for_retry
FROM outbox
GROUP BY status;
