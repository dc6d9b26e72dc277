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
DECLARE
    entry outbox_entry;
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
                                 payload)
        VALUES (queue_outbox.event_id, entry.operation_id, entry.tool, entry.tool_call_id,
                entry.conversation_id, next_sequence,
                jsonb_build_object(
                    'event_id', queue_outbox.event_id, 'type', 'tool.result', 'tool', entry.tool,
                    'tool_call_id', entry.tool_call_id, 'conversation_id', entry.conversation_id,
                    'operation_id', entry.operation_id, 'sequence', next_sequence,
                    'result', entry.result));
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
