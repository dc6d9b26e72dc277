-- What the previous release calls, kept while it may still serve beside this one (a rolling
-- upgrade runs both against this schema). Everything here goes in the next release's contract step.
-- See README.md in this folder.

-- The interface generations of the database code that this schema serves: each release of the
-- service checks that its own is among them before it reports ready.
CREATE OR REPLACE FUNCTION database_interfaces() RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ARRAY[1, 2, 3];

-- Interface 1 answered with an HTTP status from the database: the status the contract gives each
-- of its outcomes (this release names statuses in its API layer, service/http.py, and passes them in
-- each Tool's context; a test keeps the two equal).
CREATE OR REPLACE FUNCTION interface_1_statuses() RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '{"accepted": 202, "interrupted": 200, "operation_already_final": 200,
         "no_active_focusing_operation": 200, "operation_already_focusing": 409,
         "idempotency_key_reused": 409, "tool_call_expired": 410}'::jsonb;

-- Interface 1's tool call: call_tool_v2 with the Tool's function and settings as the previous
-- release named them, and the status it expects.
CREATE OR REPLACE FUNCTION call_tool(
    p_tool_call_id text, p_conversation_id text, p_tool text, p_fingerprint text,
    p_arguments jsonb, p_late_window_seconds double precision, p_state_schema_version integer)
RETURNS TABLE (status_code integer, response text, outcome text, replayed boolean,
               deadline timestamptz, settled_operation_id uuid, settled_state text,
               settled_reason text, settled_lateness_ms integer, settled_event_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    decide regproc := CASE p_tool
        WHEN 'pomodoro.start' THEN 'pomodoro_start'
        WHEN 'pomodoro.interrupt' THEN 'pomodoro_interrupt'
        WHEN 'interact.ask' THEN 'interact_ask'
    END;
BEGIN
    IF decide IS NULL THEN
        RAISE EXCEPTION 'no tool named %', p_tool USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT (interface_1_statuses() ->> r.outcome)::integer, r.response, r.outcome, r.replayed,
           r.deadline, r.settled_operation_id, r.settled_state, r.settled_reason,
           r.settled_lateness_ms, r.settled_event_id
    FROM call_tool_v2(p_tool_call_id, p_conversation_id, p_tool, p_fingerprint, p_arguments, decide,
                      jsonb_build_object('late_window_seconds', p_late_window_seconds,
                                         'state_schema_version', p_state_schema_version,
                                         'statuses', interface_1_statuses())) r;
END $$;

-- Interface 2's tool call: call_tool_v3, with the one operation a decision ended (Pomodoro's end at
-- most one) as the five settled_* columns the previous release reads.
CREATE OR REPLACE FUNCTION call_tool_v2(
    p_tool_call_id text, p_conversation_id text, p_tool text, p_fingerprint text,
    p_arguments jsonb, p_decide regproc, p_context jsonb)
RETURNS TABLE (outcome text, response text, replayed boolean, deadline timestamptz,
               settled_operation_id uuid, settled_state text, settled_reason text,
               settled_lateness_ms integer, settled_event_id uuid)
LANGUAGE sql AS $$
SELECT r.outcome, r.response, r.replayed, r.deadline, (r.settled -> 0 ->> 'operation_id')::uuid,
       r.settled -> 0 ->> 'state', r.settled -> 0 ->> 'reason',
       (r.settled -> 0 ->> 'lateness_ms')::integer, (r.settled -> 0 ->> 'event_id')::uuid
FROM call_tool_v3(p_tool_call_id, p_conversation_id, p_tool, p_fingerprint, p_arguments, p_decide,
                  p_context) r
$$;
