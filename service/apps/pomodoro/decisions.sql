-- Pomodoro's Tools. Each answers an outcome word and its JSON body, and its effects (the
-- operation it opened or ended); call_tool_v3 records and returns them (the HTTP status is the
-- API's business, named from the outcome).

-- late_interrupt_status: the one rule of the late interrupt — `operation_already_final` when the
-- conversation's latest operation logically ended (ends_at for `completed`, the decision otherwise)
-- within the window before the call, else `no_active_focusing_operation`.
CREATE OR REPLACE FUNCTION late_interrupt_status(
    p_state text, p_ends_at timestamptz, p_finalized_at timestamptz, p_now timestamptz,
    p_window interval)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN p_state <> 'focusing'
         AND p_now - CASE WHEN p_state = 'completed' THEN p_ends_at ELSE p_finalized_at END <= p_window
    THEN 'operation_already_final'
    ELSE 'no_active_focusing_operation'
END;

-- pomodoro_start: opens a Pomodoro instance in the foreground (its sub-session and snapshot) and a
-- focusing operation ending duration_seconds from now — unless one is already focusing in the
-- conversation (`operation_already_focusing`). One whose deadline has passed is settled first.
-- p_context: {"state_schema_version": int}.
CREATE OR REPLACE FUNCTION pomodoro_start(
    p_tool_call_id text, p_conversation_id text, p_arguments jsonb, p_context jsonb,
    OUT outcome text, OUT response jsonb, OUT effects decision_effects)
LANGUAGE plpgsql AS $$
DECLARE
    focusing record;
    opened record;
    started operations;
    overdue settled_operation[];
    duration integer := (p_arguments ->> 'duration_seconds')::numeric::integer;
BEGIN
    PERFORM lock_workspace(p_conversation_id, true);
    SELECT o.operation_id, o.ends_at <= statement_timestamp() AS overdue INTO focusing
    FROM operations o
    WHERE o.conversation_id = p_conversation_id AND o.state = 'focusing' AND o.tool = 'pomodoro.start';
    IF FOUND THEN
        IF NOT focusing.overdue THEN
            outcome := 'operation_already_focusing';
            response := jsonb_build_object(
                'error', 'operation_already_focusing',
                'message', 'a Pomodoro focus period is already running in this conversation',
                'operation_id', focusing.operation_id);
            RETURN;
        END IF;
        -- Its deadline has passed: that fact is settled before the new period opens.
        SELECT array_agg(s) INTO overdue
        FROM app_settle_operation(p_conversation_id, focusing.operation_id, 'completed') s;
    END IF;
    -- Through the Runtime's API (service/db/sql/75_app_api.sql): the instance, the focusing period
    -- (one per conversation, as the manifest declares), then the foreground.
    SELECT * INTO opened
    FROM app_open_instance(p_conversation_id, (p_context ->> 'state_schema_version')::integer);
    started := app_open_operation(p_conversation_id, p_tool_call_id, 'pomodoro.start', opened.instance_id,
                                  duration, p_arguments ->> 'activity');
    PERFORM app_hand_over(p_conversation_id, opened.instance_id);
    outcome := 'accepted';
    effects := ROW(overdue, started.ends_at, ARRAY[opened.instance_id], NULL, NULL)::decision_effects;
    response := jsonb_build_object(
        'tool_call_id', p_tool_call_id,
        'status', 'accepted',
        'operation', operation_json(started, 'answer'),
        'instance_id', opened.instance_id,
        'sub_session_id', opened.sub_session_id);
END $$;

-- pomodoro_interrupt: the Agent's interrupt, bound to the conversation's one focusing Pomodoro
-- (the caller never names a target): `interrupted` when it wins the compare-and-set; otherwise the
-- late-interrupt rule answers. p_context: {"late_window_seconds": number, "caller"?: {"kind"}}: a
-- person's call (a person's token on /mcp) ends it as `person_interrupt`, the Agent's as
-- `agent_interrupt`.
CREATE OR REPLACE FUNCTION pomodoro_interrupt(
    p_tool_call_id text, p_conversation_id text, p_arguments jsonb, p_context jsonb,
    OUT outcome text, OUT response jsonb, OUT effects decision_effects)
LANGUAGE plpgsql AS $$
DECLARE
    focusing uuid;
    latest record;
    settled settled_operation;
BEGIN
    IF lock_workspace(p_conversation_id, false) THEN
        SELECT o.operation_id INTO focusing FROM operations o
        WHERE o.conversation_id = p_conversation_id AND o.state = 'focusing'
          AND o.tool = 'pomodoro.start';
        IF FOUND THEN
            SELECT * INTO settled FROM app_settle_operation(
                p_conversation_id, focusing,
                CASE WHEN p_context -> 'caller' ->> 'kind' = 'person' THEN 'person_interrupted'
                     ELSE 'interrupted' END);
            IF settled.state IS NOT NULL THEN
                effects := ROW(ARRAY[settled], NULL, NULL, NULL, NULL)::decision_effects;
            END IF;
            IF settled.state = 'interrupted' THEN
                outcome := 'interrupted';
                response := jsonb_build_object(
                    'tool_call_id', p_tool_call_id, 'status', 'interrupted',
                    'operation_id', settled.operation_id);
                RETURN;
            END IF;
        END IF;
    END IF;
    SELECT o.operation_id, o.state,
           late_interrupt_status(
               o.state, o.ends_at, o.finalized_at, statement_timestamp(),
               make_interval(secs => (p_context ->> 'late_window_seconds')::double precision))
               AS status
    INTO latest
    FROM operations o
    WHERE o.conversation_id = p_conversation_id AND o.tool = 'pomodoro.start'
    ORDER BY o.started_at DESC
    LIMIT 1;
    IF FOUND AND latest.status = 'operation_already_final' THEN
        outcome := 'operation_already_final';
        response := jsonb_build_object(
            'tool_call_id', p_tool_call_id, 'status', 'operation_already_final',
            'operation_id', latest.operation_id, 'final_state', latest.state);
    ELSE
        outcome := 'no_active_focusing_operation';
        response := jsonb_build_object(
            'tool_call_id', p_tool_call_id, 'status', 'no_active_focusing_operation');
    END IF;
END $$;
