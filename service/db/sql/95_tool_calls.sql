-- call_tool_v3: one Agent Tool call in one statement, exactly one answer per tool_call_id of a
-- conversation (another conversation's same id is another call). The same
-- id with the same body (p_fingerprint) replays the recorded body byte for byte; another body is
-- `idempotency_key_reused`. An answer history retention expired (97_retention.sql) keeps its
-- fingerprint: the same body is refused with `tool_call_expired`, and the Tool never runs again.
-- Otherwise, in the one implicit transaction of the caller's statement,
-- the Tool's decision function p_decide runs (it takes the conversation's lock first, and ends
-- operations only through settle_focusing_v2) and its answer is recorded in tool_calls. A concurrent
-- call with the same id waits on the tool_calls key until the first commits, then fails with a
-- unique violation: the caller runs it again and replays. The answer's text is what is both recorded
-- and sent.
--
-- A decision function — any app's, in its folder (service/apps/<app>/*.sql) — takes (tool_call_id
-- text, conversation_id text, arguments jsonb, context jsonb) and answers (outcome text, response
-- jsonb, effects decision_effects): the outcome word names the answer and is recorded with it
-- (tool_calls.outcome; the faces name its HTTP status, service/http.py), effects what it did besides
-- (70_settle.sql). What the service needs of the effects comes back flat: the earliest deadline
-- opened, the settled operations (as JSON, none mostly), whether the conversation changed and
-- whether outbox rows were queued.
-- p_context carries the Tool's settings (e.g. the late-interrupt window) as the service passes them,
-- who calls ("caller", recorded in tool_calls.caller; service/use_cases/callers.py) and, when the
-- service traces, the call's W3C trace context ("traceparent", "tracestate"; service/trace_context.py):
-- recorded in tool_calls.traceparent and .tracestate, and the producer of every row the decision
-- writes (trace_producer, 60_outbox.sql: the operation it opens, the outbox rows it queues).
CREATE OR REPLACE FUNCTION call_tool_v3(
    p_tool_call_id text, p_conversation_id text, p_tool text, p_fingerprint text,
    p_arguments jsonb, p_decide regproc, p_context jsonb)
RETURNS TABLE (outcome text, response text, replayed boolean, deadline timestamptz, settled jsonb,
               changed boolean, queued boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    recorded record;
    decided record;
    body text;
BEGIN
    SELECT t.fingerprint, t.outcome, t.response INTO recorded FROM tool_calls t
    WHERE t.tool_call_id = p_tool_call_id AND t.conversation_id = p_conversation_id;
    IF FOUND THEN
        IF recorded.fingerprint <> p_fingerprint THEN
            RETURN QUERY SELECT 'idempotency_key_reused',
                jsonb_build_object(
                    'error', 'idempotency_key_reused',
                    'message', 'this tool_call_id was already used with a different request body')::text,
                false, NULL::timestamptz, NULL::jsonb, false, false;
        ELSIF recorded.outcome = 'tool_call_expired' THEN
            RETURN QUERY SELECT 'tool_call_expired',
                jsonb_build_object(
                    'error', 'tool_call_expired',
                    'message', 'this tool_call_id was answered longer ago than the history is kept; '
                               'its answer is gone and the call is not run again')::text,
                true, NULL::timestamptz, NULL::jsonb, false, false;
        ELSE
            RETURN QUERY SELECT recorded.outcome, recorded.response::text, true, NULL::timestamptz, NULL::jsonb, false, false;
        END IF;
        RETURN;
    END IF;
    IF p_context ? 'traceparent' THEN
        PERFORM trace_producer(p_context ->> 'traceparent', p_context ->> 'tracestate');
    END IF;
    -- The decision runs as its Tool's app (the name's prefix, "<app_scope>.<name>"): what it asks of
    -- the engine is held to that app's own (acting_app, 75_app_api.sql).
    PERFORM set_config('lineup.acting_app', split_part(p_tool, '.', 1), true);
    EXECUTE format('SELECT d.outcome, d.response, d.effects FROM %s($1, $2, $3, $4) d', p_decide)
        INTO decided
        USING p_tool_call_id, p_conversation_id, p_arguments, p_context;
    PERFORM set_config('lineup.acting_app', '', true);
    body := decided.response::text;
    -- Who called (tool_calls.caller, migration 0025) and the call's trace context (migration 0026)
    -- when the service says: the release before them says neither, and migration 0023 makes this
    -- function from this file before 0025 and 0026 add the columns, while only that release serves.
    IF p_context ? 'caller' THEN
        INSERT INTO tool_calls (tool_call_id, conversation_id, tool, fingerprint, outcome, response,
                                caller, traceparent, tracestate)
        VALUES (p_tool_call_id, p_conversation_id, p_tool, p_fingerprint, decided.outcome, body::json,
                p_context -> 'caller', p_context ->> 'traceparent', p_context ->> 'tracestate');
    ELSE
        INSERT INTO tool_calls (tool_call_id, conversation_id, tool, fingerprint, outcome, response)
        VALUES (p_tool_call_id, p_conversation_id, p_tool, p_fingerprint, decided.outcome, body::json);
    END IF;
    RETURN QUERY SELECT decided.outcome, body, false, e.deadline,
        CASE WHEN e.settled IS NOT NULL THEN to_jsonb(e.settled) END,
        e.settled IS NOT NULL OR e.opened IS NOT NULL OR e.closed IS NOT NULL OR e.queued IS NOT NULL,
        e.settled IS NOT NULL OR e.queued IS NOT NULL
    FROM (SELECT (decided.effects).*) e;
END $$;
