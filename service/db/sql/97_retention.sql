-- History retention: finished history older than a cutoff is removed in bounded batches (the
-- caller, service/use_cases/history_retention.py, loops over them, one transaction per batch).
-- Each batch walks an index from where the last one stopped, so its cost is that of the rows it
-- looks at, never of the table. Never removed: a focusing operation, a pending interaction, an
-- outbox row that is pending or dead, and what they reference (their operation, its instance,
-- the instance's sub-session). A tool call's answer is not deleted but expired: its row keeps the
-- fingerprint, so a replay is refused (410 tool_call_expired) and the Tool never runs twice.

-- uuid_v7_floor: the smallest version 7 UUID of the millisecond p_at, so that `id < uuid_v7_floor(t)`
-- walks a uuid_v7 primary key up to the rows made at t.
CREATE OR REPLACE FUNCTION uuid_v7_floor(p_at timestamptz) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN encode(
    substring(int8send(floor(extract(epoch FROM p_at) * 1000)::bigint) FROM 3)
    || '\x70000000000000000000'::bytea,
    'hex')::uuid;

-- expire_tool_call_answers: up to p_limit recorded answers made before p_cutoff lose their body;
-- the row (tool_call_id, conversation, fingerprint) stays and answers a replay with
-- tool_call_expired. Kept whole: the answer of a call whose outbox row is not delivered, whose
-- interaction is pending or whose operation is focusing. Answers how many it expired and how many it looked at (fewer looked at
-- than p_limit: nothing older is left).
CREATE OR REPLACE FUNCTION expire_tool_call_answers(
    p_cutoff timestamptz, p_limit integer, OUT expired integer, OUT examined integer)
LANGUAGE plpgsql AS $$
BEGIN
    WITH candidates AS (
        SELECT t.tool_call_id, t.conversation_id FROM tool_calls t
        WHERE t.outcome <> 'tool_call_expired' AND t.created_at < p_cutoff
        ORDER BY t.created_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ),
    done AS (
        UPDATE tool_calls t
        SET outcome = 'tool_call_expired',
            response = '{"error":"tool_call_expired"}'::json
        FROM candidates c
        WHERE t.tool_call_id = c.tool_call_id AND t.conversation_id = c.conversation_id
          AND NOT EXISTS (SELECT 1 FROM outbox o
                          WHERE o.tool_call_id = t.tool_call_id AND o.conversation_id = t.conversation_id
                            AND o.status <> 'delivered')
          AND NOT EXISTS (SELECT 1 FROM interactions i
                          WHERE i.tool_call_id = t.tool_call_id AND i.conversation_id = t.conversation_id
                            AND i.status = 'pending')
          AND NOT EXISTS (SELECT 1 FROM operations p
                          WHERE p.tool_call_id = t.tool_call_id AND p.conversation_id = t.conversation_id
                            AND p.state = 'focusing')
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM candidates) INTO expired, examined;
END $$;

-- prune_operations: finished operations made before p_cutoff and finalized before it, walked in
-- operation_id order after p_after (up to p_limit looked at), with their delivered outbox rows
-- (and so those rows' attempts). One with a pending or dead outbox row stays. Answers how many it
-- removed, how many it looked at, and the last operation_id it looked at (the next batch's p_after).
CREATE OR REPLACE FUNCTION prune_operations(
    p_cutoff timestamptz, p_limit integer, p_after uuid,
    OUT removed integer, OUT examined integer, OUT last_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    ids uuid[];
BEGIN
    SELECT array_agg(x.operation_id ORDER BY x.operation_id), count(*), (array_agg(x.operation_id ORDER BY x.operation_id DESC))[1]
    INTO ids, examined, last_id
    FROM (
        SELECT o.operation_id, o.state, o.finalized_at FROM operations o
        WHERE o.operation_id < uuid_v7_floor(p_cutoff)
          AND o.operation_id > coalesce(p_after, '00000000-0000-0000-0000-000000000000'::uuid)
        ORDER BY o.operation_id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ) x;
    WITH finished AS (
        SELECT o.operation_id FROM operations o
        WHERE o.operation_id = ANY(ids) AND o.state <> 'focusing' AND o.finalized_at < p_cutoff
          AND NOT EXISTS (SELECT 1 FROM outbox b
                          WHERE b.operation_id = o.operation_id AND b.conversation_id = o.conversation_id
                            AND b.status <> 'delivered')
    ),
    delivered AS (
        DELETE FROM outbox b USING finished f WHERE b.operation_id = f.operation_id
    )
    SELECT array_agg(f.operation_id) INTO ids FROM finished f;
    DELETE FROM operations o WHERE o.operation_id = ANY(ids);
    GET DIAGNOSTICS removed = ROW_COUNT;
END $$;

-- prune_instances: app instances closed before p_cutoff (made before it too), walked in
-- instance_id order after p_after (up to p_limit looked at), with their sub-session, snapshot,
-- capabilities, surface events, and the messages and interactions of their sub-session. One that
-- still has an operation (focusing, or kept by its outbox row), an interaction pending or whose
-- outbox row is not delivered, or holds a foreground stays. Answers as prune_operations does.
CREATE OR REPLACE FUNCTION prune_instances(
    p_cutoff timestamptz, p_limit integer, p_after uuid,
    OUT removed integer, OUT examined integer, OUT last_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    ids uuid[];
    subs uuid[];
BEGIN
    SELECT array_agg(x.instance_id), count(*), (array_agg(x.instance_id ORDER BY x.instance_id DESC))[1] INTO ids, examined, last_id
    FROM (
        SELECT a.instance_id FROM app_instances a
        WHERE a.instance_id < uuid_v7_floor(p_cutoff)
          AND a.instance_id > coalesce(p_after, '00000000-0000-0000-0000-000000000000'::uuid)
        ORDER BY a.instance_id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ) x;
    SELECT array_agg(a.instance_id), array_agg(s.sub_session_id) FILTER (WHERE s.sub_session_id IS NOT NULL)
    INTO ids, subs
    FROM app_instances a
    LEFT JOIN sub_sessions s ON s.instance_id = a.instance_id AND s.conversation_id = a.conversation_id
    WHERE a.instance_id = ANY(ids) AND a.status = 'closed' AND a.closed_at < p_cutoff
      AND NOT EXISTS (SELECT 1 FROM operations o
                      WHERE o.instance_id = a.instance_id AND o.conversation_id = a.conversation_id)
      AND NOT EXISTS (SELECT 1 FROM workspaces w
                      WHERE w.foreground_instance_id = a.instance_id
                        AND w.conversation_id = a.conversation_id)
      AND NOT EXISTS (SELECT 1 FROM interactions i
                      WHERE i.asked_in_sub_session_id = s.sub_session_id
                        AND i.conversation_id = a.conversation_id
                        AND (i.status = 'pending'
                             OR EXISTS (SELECT 1 FROM outbox o
                                        WHERE o.tool_call_id = i.tool_call_id
                                          AND o.conversation_id = i.conversation_id
                                          AND o.status <> 'delivered')));
    removed := 0;
    IF ids IS NULL THEN
        RETURN;
    END IF;
    DELETE FROM interaction_tasks k USING interactions i
    WHERE k.tool_call_id = i.tool_call_id AND k.conversation_id = i.conversation_id
      AND i.asked_in_sub_session_id = ANY(subs);
    DELETE FROM interactions i WHERE i.asked_in_sub_session_id = ANY(subs);
    DELETE FROM messages m WHERE m.sub_session_id = ANY(subs);
    DELETE FROM surface_events e WHERE e.instance_id = ANY(ids);
    DELETE FROM capabilities c WHERE c.instance_id = ANY(ids);
    DELETE FROM instance_states st WHERE st.instance_id = ANY(ids);
    DELETE FROM sub_sessions s WHERE s.instance_id = ANY(ids);
    DELETE FROM app_instances a WHERE a.instance_id = ANY(ids);
    GET DIAGNOSTICS removed = ROW_COUNT;
END $$;

-- prune_messages: messages made before p_cutoff, in message_id order (uuid_v7), up to p_limit —
-- those of open sub-sessions too: a message is history once it is older than the period.
CREATE OR REPLACE FUNCTION prune_messages(
    p_cutoff timestamptz, p_limit integer, OUT removed integer, OUT examined integer)
LANGUAGE plpgsql AS $$
BEGIN
    WITH candidates AS (
        SELECT m.message_id FROM messages m
        WHERE m.message_id < uuid_v7_floor(p_cutoff)
        ORDER BY m.message_id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ),
    gone AS (
        DELETE FROM messages m USING candidates c WHERE m.message_id = c.message_id RETURNING 1
    )
    SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM candidates) INTO removed, examined;
END $$;

-- prune_surface_events: surface events made before p_cutoff, oldest first (their identity key is
-- in time order): the first p_limit rows, those older than the cutoff removed.
CREATE OR REPLACE FUNCTION prune_surface_events(
    p_cutoff timestamptz, p_limit integer, OUT removed integer, OUT examined integer)
LANGUAGE plpgsql AS $$
BEGIN
    WITH head AS (
        SELECT e.surface_event_id, e.created_at FROM surface_events e
        ORDER BY e.surface_event_id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ),
    gone AS (
        DELETE FROM surface_events e USING head h
        WHERE e.surface_event_id = h.surface_event_id AND h.created_at < p_cutoff
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM head) INTO removed, examined;
END $$;

-- prune_interactions: answered interactions asked before p_cutoff (of the main conversation or of
-- an open sub-session), oldest first, with their task ids; one whose outbox row is not delivered
-- stays. Pending ones are never removed.
CREATE OR REPLACE FUNCTION prune_interactions(
    p_cutoff timestamptz, p_limit integer, OUT removed integer, OUT examined integer)
LANGUAGE plpgsql AS $$
DECLARE
    ids text[];
    conversations text[];
BEGIN
    SELECT array_agg(x.tool_call_id) FILTER (
               WHERE NOT EXISTS (SELECT 1 FROM outbox o
                                 WHERE o.tool_call_id = x.tool_call_id
                                   AND o.conversation_id = x.conversation_id
                                   AND o.status <> 'delivered')),
           array_agg(x.conversation_id) FILTER (
               WHERE NOT EXISTS (SELECT 1 FROM outbox o
                                 WHERE o.tool_call_id = x.tool_call_id
                                   AND o.conversation_id = x.conversation_id
                                   AND o.status <> 'delivered')),
           count(*)
    INTO ids, conversations, examined
    FROM (
        SELECT i.tool_call_id, i.conversation_id FROM interactions i
        WHERE i.created_at < p_cutoff AND i.status = 'answered'
        ORDER BY i.created_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ) x;
    DELETE FROM interaction_tasks k
    USING unnest(ids, conversations) AS g(tool_call_id, conversation_id)
    WHERE k.tool_call_id = g.tool_call_id AND k.conversation_id = g.conversation_id;
    DELETE FROM interactions i
    USING unnest(ids, conversations) AS g(tool_call_id, conversation_id)
    WHERE i.tool_call_id = g.tool_call_id AND i.conversation_id = g.conversation_id;
    GET DIAGNOSTICS removed = ROW_COUNT;
END $$;

-- For operators: the oldest history kept, each the first entry of an index (no scan). A view, so
-- that the read-only operator role sees these three times and nothing of the rows behind them.
CREATE OR REPLACE VIEW history_oldest AS
SELECT (SELECT o.started_at FROM operations o ORDER BY o.operation_id LIMIT 1) AS oldest_operation_at,
       (SELECT min(t.created_at) FROM tool_calls t WHERE t.outcome <> 'tool_call_expired') AS oldest_answer_at,
       (SELECT m.created_at FROM messages m ORDER BY m.message_id LIMIT 1) AS oldest_message_at;

-- prune_conversation: on Citus (a function distributed by its conversation: the call runs on the
-- worker holding it, every statement on its shard), the same rules as the batches above for one
-- conversation, under its workspace lock when nobody holds it (SKIP LOCKED; a busy conversation
-- waits for the next round): its finished operations with their delivered outbox rows, its closed
-- instances with what hangs from them, its answers expired, its old messages, surface events and
-- answered interactions. Answers how many rows of each kind it removed (answers: expired); nothing
-- when it was busy.
CREATE OR REPLACE FUNCTION prune_conversation(p_conversation_id text, p_cutoff timestamptz)
RETURNS TABLE (kind text, removed integer)
LANGUAGE plpgsql AS $$
DECLARE
    ids uuid[];
    subs uuid[];
    calls text[];
    n integer;
BEGIN
    PERFORM 1 FROM workspaces WHERE conversation_id = p_conversation_id FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM workspaces WHERE conversation_id = p_conversation_id) THEN
            RETURN;  -- busy: the next round
        END IF;
        -- Never opened (an interrupt in a conversation with no workspace is answered without making
        -- one): nothing of it but recorded answers, expired as below.
        UPDATE tool_calls SET outcome = 'tool_call_expired', response = '{"error":"tool_call_expired"}'::json
        WHERE conversation_id = p_conversation_id AND tool_call_id IN (
            SELECT t.tool_call_id FROM tool_calls t
            WHERE t.conversation_id = p_conversation_id AND t.outcome <> 'tool_call_expired'
              AND t.created_at < p_cutoff
              AND NOT EXISTS (SELECT 1 FROM outbox o
                              WHERE o.conversation_id = p_conversation_id
                                AND o.tool_call_id = t.tool_call_id AND o.status <> 'delivered'));
        GET DIAGNOSTICS n = ROW_COUNT;
        RETURN QUERY SELECT k, CASE WHEN k = 'tool_call_answers' THEN n ELSE 0 END
                     FROM unnest(ARRAY['operations', 'instances', 'tool_call_answers', 'messages',
                                       'surface_events', 'interactions']) AS k;
        RETURN;
    END IF;
    -- Finished operations, and their delivered outbox rows (one with a pending or dead row stays).
    ids := ARRAY(
        SELECT o.operation_id FROM operations o
        WHERE o.conversation_id = p_conversation_id AND o.operation_id < uuid_v7_floor(p_cutoff)
          AND o.state <> 'focusing' AND o.finalized_at < p_cutoff
          AND NOT EXISTS (SELECT 1 FROM outbox b
                          WHERE b.conversation_id = p_conversation_id
                            AND b.operation_id = o.operation_id AND b.status <> 'delivered'));
    DELETE FROM outbox WHERE conversation_id = p_conversation_id AND operation_id = ANY(ids);
    DELETE FROM operations WHERE conversation_id = p_conversation_id AND operation_id = ANY(ids);
    GET DIAGNOSTICS n = ROW_COUNT;
    kind := 'operations'; removed := n; RETURN NEXT;
    -- Closed instances nothing keeps, with their sub-session, snapshot, capabilities, surface
    -- events, and the messages and interactions of their sub-session.
    SELECT array_agg(a.instance_id), array_agg(s.sub_session_id) FILTER (WHERE s.sub_session_id IS NOT NULL)
    INTO ids, subs
    FROM app_instances a
    LEFT JOIN sub_sessions s ON s.instance_id = a.instance_id AND s.conversation_id = a.conversation_id
    WHERE a.conversation_id = p_conversation_id AND a.instance_id < uuid_v7_floor(p_cutoff)
      AND a.status = 'closed' AND a.closed_at < p_cutoff
      AND NOT EXISTS (SELECT 1 FROM operations o
                      WHERE o.conversation_id = p_conversation_id AND o.instance_id = a.instance_id)
      AND NOT EXISTS (SELECT 1 FROM workspaces w
                      WHERE w.conversation_id = p_conversation_id
                        AND w.foreground_instance_id = a.instance_id)
      AND NOT EXISTS (SELECT 1 FROM interactions i
                      WHERE i.conversation_id = p_conversation_id
                        AND i.asked_in_sub_session_id = s.sub_session_id
                        AND (i.status = 'pending'
                             OR EXISTS (SELECT 1 FROM outbox o
                                        WHERE o.conversation_id = p_conversation_id
                                          AND o.tool_call_id = i.tool_call_id
                                          AND o.status <> 'delivered')));
    n := 0;
    IF ids IS NOT NULL THEN
        calls := ARRAY(SELECT i.tool_call_id FROM interactions i
                       WHERE i.conversation_id = p_conversation_id
                         AND i.asked_in_sub_session_id = ANY(subs));
        DELETE FROM interaction_tasks
        WHERE conversation_id = p_conversation_id AND tool_call_id = ANY(calls);
        DELETE FROM interactions WHERE conversation_id = p_conversation_id AND tool_call_id = ANY(calls);
        DELETE FROM messages WHERE conversation_id = p_conversation_id AND sub_session_id = ANY(subs);
        DELETE FROM surface_events WHERE conversation_id = p_conversation_id AND instance_id = ANY(ids);
        DELETE FROM capabilities WHERE conversation_id = p_conversation_id AND instance_id = ANY(ids);
        DELETE FROM instance_states WHERE conversation_id = p_conversation_id AND instance_id = ANY(ids);
        DELETE FROM sub_sessions WHERE conversation_id = p_conversation_id AND instance_id = ANY(ids);
        DELETE FROM app_instances WHERE conversation_id = p_conversation_id AND instance_id = ANY(ids);
        GET DIAGNOSTICS n = ROW_COUNT;
    END IF;
    kind := 'instances'; removed := n; RETURN NEXT;
    -- Answers expired (the fingerprint stays): not those still needed.
    calls := ARRAY(
        SELECT t.tool_call_id FROM tool_calls t
        WHERE t.conversation_id = p_conversation_id AND t.outcome <> 'tool_call_expired' AND t.created_at < p_cutoff
          AND NOT EXISTS (SELECT 1 FROM outbox o
                          WHERE o.conversation_id = p_conversation_id
                            AND o.tool_call_id = t.tool_call_id AND o.status <> 'delivered')
          AND NOT EXISTS (SELECT 1 FROM interactions i
                          WHERE i.conversation_id = p_conversation_id
                            AND i.tool_call_id = t.tool_call_id AND i.status = 'pending')
          AND NOT EXISTS (SELECT 1 FROM operations p
                          WHERE p.conversation_id = p_conversation_id
                            AND p.tool_call_id = t.tool_call_id AND p.state = 'focusing'));
    UPDATE tool_calls
    SET outcome = 'tool_call_expired',
        response = '{"error":"tool_call_expired"}'::json
    WHERE conversation_id = p_conversation_id AND tool_call_id = ANY(calls);
    GET DIAGNOSTICS n = ROW_COUNT;
    kind := 'tool_call_answers'; removed := n; RETURN NEXT;
    DELETE FROM messages
    WHERE conversation_id = p_conversation_id AND message_id < uuid_v7_floor(p_cutoff);
    GET DIAGNOSTICS n = ROW_COUNT;
    kind := 'messages'; removed := n; RETURN NEXT;
    DELETE FROM surface_events WHERE conversation_id = p_conversation_id AND created_at < p_cutoff;
    GET DIAGNOSTICS n = ROW_COUNT;
    kind := 'surface_events'; removed := n; RETURN NEXT;
    -- Answered interactions whose outbox row is delivered.
    calls := ARRAY(
        SELECT i.tool_call_id FROM interactions i
        WHERE i.conversation_id = p_conversation_id AND i.created_at < p_cutoff
          AND i.status = 'answered'
          AND NOT EXISTS (SELECT 1 FROM outbox o
                          WHERE o.conversation_id = p_conversation_id
                            AND o.tool_call_id = i.tool_call_id AND o.status <> 'delivered'));
    DELETE FROM interaction_tasks WHERE conversation_id = p_conversation_id AND tool_call_id = ANY(calls);
    DELETE FROM interactions WHERE conversation_id = p_conversation_id AND tool_call_id = ANY(calls);
    GET DIAGNOSTICS n = ROW_COUNT;
    kind := 'interactions'; removed := n; RETURN NEXT;
END $$;
