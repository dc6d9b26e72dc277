-- Interact's standard interactions: asked by the Agent (interact.ask), answered once by the person.

-- interact_ask: a pending interaction owned by the conversation, recording the sub-session of the
-- app instance in the foreground when it was asked (a Pomodoro whose deadline has passed is settled
-- first: it is no longer in front). A conversation holds at most p_context's "max_pending"
-- interactions waiting for the person (counted under the conversation's lock): past it the call
-- is refused as too_many_requests, and nothing is written but its recorded answer.
CREATE OR REPLACE FUNCTION interact_ask(
    p_tool_call_id text, p_conversation_id text, p_arguments jsonb, p_context jsonb,
    OUT outcome text, OUT response jsonb, OUT effects decision_effects)
LANGUAGE plpgsql AS $$
DECLARE
    asked interactions;
    asked_in uuid;
    overdue settled_operation[];
BEGIN
    PERFORM lock_workspace(p_conversation_id, true);
    SELECT array_agg(s) INTO overdue FROM settle_if_overdue(p_conversation_id) s;
    IF overdue IS NOT NULL THEN
        effects := ROW(overdue, NULL, NULL, NULL, NULL)::decision_effects;
    END IF;
    IF (SELECT count(*) FROM (
            SELECT 1 FROM interactions
            WHERE conversation_id = p_conversation_id AND status = 'pending'
            LIMIT (p_context ->> 'max_pending')::integer) AS waiting)
       >= (p_context ->> 'max_pending')::integer THEN
        outcome := 'too_many_requests';
        response := jsonb_build_object(
            'error', 'too_many_requests',
            'message', format('%s interactions already wait for the person in this conversation '
                              '(INTERACT_PENDING_PER_CONVERSATION): ask again once one is answered',
                              p_context ->> 'max_pending'));
        RETURN;
    END IF;
    SELECT s.sub_session_id INTO asked_in
    FROM workspaces w
    JOIN app_instances i ON i.instance_id = w.foreground_instance_id
                        AND i.conversation_id = w.conversation_id AND i.status = 'open'
    LEFT JOIN sub_sessions s ON s.instance_id = i.instance_id AND s.conversation_id = i.conversation_id
    WHERE w.conversation_id = p_conversation_id;
    INSERT INTO interactions (tool_call_id, conversation_id, prompt, choices, asked_in_sub_session_id,
                              created_at)
    VALUES (p_tool_call_id, p_conversation_id, p_arguments ->> 'prompt',
            coalesce(p_arguments -> 'choices', '[]'::jsonb), asked_in, statement_timestamp())
    RETURNING * INTO asked;
    outcome := 'accepted';
    response := jsonb_build_object(
        'tool_call_id', p_tool_call_id,
        'status', 'accepted',
        'interaction', jsonb_build_object(
            'tool_call_id', asked.tool_call_id,
            'conversation_id', asked.conversation_id,
            'prompt', asked.prompt,
            'choices', asked.choices,
            'status', asked.status,
            'asked_in_sub_session_id', asked.asked_in_sub_session_id));
END $$;

-- interaction_result: the result of an answered interact.ask, as its outbox row carries it (and its
-- task shows it).
CREATE OR REPLACE FUNCTION interaction_result(p_answer text, p_answered_at timestamptz) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object('state', 'answered', 'answer', p_answer, 'answered_at', rfc3339(p_answered_at));

-- answer_interaction_v2: decides a pending interaction of the conversation once (pending ->
-- answered). The winner, in the same transaction, queues the one outbox row of the interact.ask
-- call and appends the answer to the main conversation as the person's message (never to the
-- sub-session it was asked in, which may have ended). No row back: it was not pending, or it is an
-- app's question of forms (answered by answer_app_form, 75_app_api.sql). The caller holds the
-- conversation's lock.
CREATE OR REPLACE FUNCTION answer_interaction_v2(p_conversation_id text, p_tool_call_id text,
                                                 p_answer text)
RETURNS TABLE (tool_call_id text, conversation_id text, prompt text, choices jsonb, status text,
               asked_in_sub_session_id uuid, answer text, answered_at timestamptz,
               created_at timestamptz, event_id uuid, message_id uuid)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    answered interactions;
    queued_event uuid;
    posted_message uuid := uuid_v7();
BEGIN
    UPDATE interactions i SET status = 'answered', answer = p_answer, answered_at = statement_timestamp()
    WHERE i.tool_call_id = p_tool_call_id AND i.conversation_id = p_conversation_id
      AND i.status = 'pending' AND i.forms IS NULL
    RETURNING i.* INTO answered;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    queued_event := app_queue_result(answered.conversation_id, 'interact.ask', answered.tool_call_id,
                                     interaction_result(answered.answer, answered.answered_at));
    INSERT INTO messages (message_id, conversation_id, sub_session_id, role, text, created_at)
    VALUES (posted_message, answered.conversation_id, NULL, 'user', answered.answer, answered.answered_at);
    RETURN QUERY SELECT answered.tool_call_id, answered.conversation_id, answered.prompt, answered.choices,
        answered.status, answered.asked_in_sub_session_id, answered.answer, answered.answered_at,
        answered.created_at, queued_event, posted_message;
END $$;
