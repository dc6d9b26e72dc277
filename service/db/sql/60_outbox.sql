-- The outbox: the one way a Tool result enters it, and what an operator sees at a psql prompt.

-- One Tool result to queue.
CREATE TYPE outbox_entry AS (
    conversation_id text,
    tool text,
    tool_call_id text,
    operation_id uuid,
    result jsonb
);

-- queue_outbox: each entry becomes one pending row under its conversation's next sequence number
-- (the relay delivers a conversation's rows in that order), its payload being exactly what the
-- relay POSTs. At most one entry per conversation per call; the caller holds their locks. Answers
-- each entry's tool_call_id with the event_id it was given.
CREATE OR REPLACE FUNCTION queue_outbox(p_entries outbox_entry[])
RETURNS TABLE (tool_call_id text, event_id uuid)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH entries AS (
        SELECT e.*, uuid_v7() AS event_id FROM unnest(p_entries) e
    ),
    sequenced AS (
        UPDATE workspaces w SET outbox_sequence = w.outbox_sequence + 1
        FROM entries e
        WHERE w.conversation_id = e.conversation_id
        RETURNING w.conversation_id, w.outbox_sequence
    ),
    queued AS (
        INSERT INTO outbox (event_id, operation_id, tool, tool_call_id, conversation_id, sequence, payload)
        SELECT e.event_id, e.operation_id, e.tool, e.tool_call_id, e.conversation_id, q.outbox_sequence,
               jsonb_build_object(
                   'event_id', e.event_id, 'type', 'tool.result', 'tool', e.tool,
                   'tool_call_id', e.tool_call_id, 'conversation_id', e.conversation_id,
                   'operation_id', e.operation_id, 'sequence', q.outbox_sequence, 'result', e.result)
        FROM entries e JOIN sequenced q USING (conversation_id)
        RETURNING outbox.tool_call_id, outbox.event_id
    )
    SELECT q.tool_call_id, q.event_id FROM queued q;
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
