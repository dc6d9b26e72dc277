-- The Runtime's API for MiniApps: what an app's decision (service/apps/<app>/*.sql) may ask of the
-- engine. An app writes none of the engine's tables (operations, workspaces, app_instances, outbox,
-- tool_calls) itself: it calls these, besides lock_workspace (40_workspaces.sql), the deadline rule
-- settle_if_overdue (70_settle.sql) and operation_json (its 'answer' view). A test reads every app
-- folder's SQL and fails on any such write (tests/unit/test_app_sql_uses_the_runtime_api.py).
--
-- Which app asks is the engine's to know, not the app's to say: call_tool_v3 names the app of the
-- Tool it runs (the tool's name is "<app_scope>.<name>") for the length of the decision
-- (acting_app). An app acting touches only its own operations and instances, and opens operations
-- only for its own Tools; anything else is refused (insufficient_privilege). Outside a Tool call —
-- the Runtime's own Python calling an app's function, such as the person's answer to interact.ask —
-- no app is acting, and the Runtime's caller is trusted.
--
-- What a Tool's operations are held to is declared in its app's manifest ("operation":
-- one_running_per_conversation, max_seconds) and copied by migrate into app_tools (service.db.code,
-- declare_tools); the table enforces it the same way for every Tool, whoever writes the row
-- (operations_guard marks a new operation one_running from its Tool's declaration, and the unique
-- index uq_operations_one_running_per_tool holds the marked ones; no index or branch names a Tool).

-- acting_app: the app whose decision is running (set by call_tool_v3 for the decision's length),
-- NULL outside a Tool call.
CREATE OR REPLACE FUNCTION acting_app() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN nullif(current_setting('lineup.acting_app', true), '');

-- refuse_other_app: raises insufficient_privilege when an app is acting and p_app_scope, the owner of
-- what it is about to touch (p_what), is another app.
CREATE OR REPLACE FUNCTION refuse_other_app(p_app_scope text, p_what text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    acting text := acting_app();
BEGIN
    IF acting IS NOT NULL AND p_app_scope IS DISTINCT FROM acting THEN
        RAISE EXCEPTION 'app % may not touch %, which is app %''s', acting, p_what, coalesce(p_app_scope, 'no')
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END $$;

-- app_open_instance: an instance of the acting app in the conversation, with its sub-session and —
-- p_schema_version not null — its empty snapshot (open_instance). It is not in front yet: the app
-- hands the foreground over (app_hand_over) once what it opened it for exists.
CREATE OR REPLACE FUNCTION app_open_instance(
    p_conversation_id text, p_schema_version integer, OUT instance_id uuid, OUT sub_session_id uuid)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    acting text := acting_app();
BEGIN
    IF acting IS NULL THEN
        RAISE EXCEPTION 'an instance is opened by an app''s decision' USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT o.instance_id, o.sub_session_id INTO instance_id, sub_session_id
    FROM open_instance(p_conversation_id, acting, p_schema_version) o;
END $$;

-- app_close_instance: closes an instance of the acting app: its focusing operations are cancelled
-- (app_closed) through the one compare-and-set, which closes it; one without any is closed as it is
-- (close_instances_v2). Answers the operations it ended.
CREATE OR REPLACE FUNCTION app_close_instance(p_conversation_id text, p_instance_id uuid)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
DECLARE
    owner text;
    focusing uuid[];
BEGIN
    SELECT i.app_scope INTO owner FROM app_instances i
    WHERE i.conversation_id = p_conversation_id AND i.instance_id = p_instance_id;
    PERFORM refuse_other_app(owner, format('instance %s', p_instance_id));
    SELECT array_agg(o.operation_id) INTO focusing FROM operations o
    WHERE o.conversation_id = p_conversation_id AND o.instance_id = p_instance_id AND o.state = 'focusing';
    IF focusing IS NOT NULL THEN
        RETURN QUERY SELECT * FROM settle_focusing_v2(p_conversation_id, focusing, 'cancelled', 'app_closed');
    END IF;
    PERFORM close_instances_v2(p_conversation_id, ARRAY[p_instance_id], statement_timestamp());
END $$;

-- app_hand_over: brings the acting app's open instance p_instance_id to the foreground.
CREATE OR REPLACE FUNCTION app_hand_over(p_conversation_id text, p_instance_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE workspaces w SET foreground_instance_id = p_instance_id, updated_at = statement_timestamp()
    WHERE w.conversation_id = p_conversation_id
      AND EXISTS (SELECT 1 FROM app_instances i
                  WHERE i.conversation_id = p_conversation_id AND i.instance_id = p_instance_id
                    AND i.status = 'open' AND i.app_scope = coalesce(acting_app(), i.app_scope));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'instance % is not an open instance of app % in conversation %', p_instance_id,
            coalesce(acting_app(), 'any'), p_conversation_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END $$;

-- app_hand_back: gives the foreground back to Interact when an instance of the acting app holds it
-- (another app's instance in front stays there). Answers whether it did.
CREATE OR REPLACE FUNCTION app_hand_back(p_conversation_id text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE workspaces w SET foreground_instance_id = NULL, updated_at = statement_timestamp()
    WHERE w.conversation_id = p_conversation_id
      AND EXISTS (SELECT 1 FROM app_instances i
                  WHERE i.conversation_id = p_conversation_id AND i.instance_id = w.foreground_instance_id
                    AND i.app_scope = coalesce(acting_app(), i.app_scope));
    RETURN FOUND;
END $$;

-- app_open_operation: a focusing operation of the acting app's Tool p_tool (the call p_tool_call_id),
-- in its instance p_instance_id, ending p_duration_seconds from now (its deadline: the sweeper, or
-- any request after it, settles it `completed`). What the Tool declared in its manifest (app_tools)
-- is held by the table itself, whoever writes it (operations_guard, 20_guards.sql): its deadline at
-- most max_seconds away and — one_running_per_conversation — the unique index
-- uq_operations_one_running_per_tool (the app answers its own refusal first, under the lock; the
-- index is what makes it a rule). It keeps the trace context of the call that opens it
-- (producer_traceparent, 60_outbox.sql), which the deadline sweeper's settle links to. Answers the
-- row.
CREATE OR REPLACE FUNCTION app_open_operation(
    p_conversation_id text, p_tool_call_id text, p_tool text, p_instance_id uuid,
    p_duration_seconds integer, p_activity text)
RETURNS operations
LANGUAGE plpgsql AS $$
DECLARE
    acting text := acting_app();
    opened operations;
BEGIN
    IF acting IS NULL OR split_part(p_tool, '.', 1) <> acting THEN
        RAISE EXCEPTION 'an operation of tool % is opened by its own app''s decision, not by %', p_tool,
            coalesce(acting, 'a caller outside a Tool call') USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM 1 FROM app_instances i
    WHERE i.conversation_id = p_conversation_id AND i.instance_id = p_instance_id
      AND i.app_scope = acting AND i.status = 'open';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'instance % is not an open instance of app % in conversation %', p_instance_id,
            acting, p_conversation_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO operations (operation_id, tool, tool_call_id, conversation_id, app_scope, instance_id,
                            duration_seconds, activity, started_at, ends_at, traceparent, tracestate)
    VALUES (uuid_v7(), p_tool, p_tool_call_id, p_conversation_id, acting, p_instance_id,
            p_duration_seconds, p_activity, statement_timestamp(),
            statement_timestamp() + make_interval(secs => p_duration_seconds),
            producer_traceparent(), producer_tracestate())
    RETURNING * INTO opened;
    RETURN opened;
END $$;

-- app_settle_operation: ends an operation of the acting app with an outcome word, through the one
-- compare-and-set (settle_focusing_v2): `interrupted` (agent_interrupt), `person_interrupted`
-- (interrupted, person_interrupt: the Tool call's caller is a person, p_context's "caller"),
-- `cancelled` (app_closed) or `completed` (deadline_reached, only once its deadline has passed). An operation whose deadline has
-- passed is `completed` whatever the word; one no longer focusing is left as it is (no row back).
-- Another app's operation is refused.
CREATE OR REPLACE FUNCTION app_settle_operation(
    p_conversation_id text, p_operation_id uuid, p_outcome text)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
BEGIN
    IF p_outcome = 'interrupted' THEN
        RETURN QUERY SELECT * FROM settle_focusing_v2(p_conversation_id, ARRAY[p_operation_id],
                                                      'interrupted', 'agent_interrupt');
    ELSIF p_outcome = 'person_interrupted' THEN
        RETURN QUERY SELECT * FROM settle_focusing_v2(p_conversation_id, ARRAY[p_operation_id],
                                                      'interrupted', 'person_interrupt');
    ELSIF p_outcome = 'cancelled' THEN
        RETURN QUERY SELECT * FROM settle_focusing_v2(p_conversation_id, ARRAY[p_operation_id],
                                                      'cancelled', 'app_closed');
    ELSIF p_outcome = 'completed' THEN
        RETURN QUERY SELECT * FROM settle_focusing_v2(p_conversation_id, ARRAY[p_operation_id],
                                                      'completed', 'deadline_reached', true);
    ELSE
        RAISE EXCEPTION 'an app settles an operation interrupted, person_interrupted, cancelled or completed, not %', p_outcome
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END $$;

-- app_queue_result: queues the one result of the acting app's Tool call p_tool_call_id (a call that
-- opened no operation, such as interact.ask, answered later): one outbox row under the
-- conversation's next sequence number (queue_outbox), with the trace context of the transaction's
-- producer (producer_traceparent, 60_outbox.sql) or, when none said one (the person's answer to
-- interact.ask), of the call p_tool_call_id itself. The caller holds the conversation's lock.
-- Answers its event id.
CREATE OR REPLACE FUNCTION app_queue_result(
    p_conversation_id text, p_tool text, p_tool_call_id text, p_result jsonb)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    queued uuid;
    traced record;
BEGIN
    PERFORM refuse_other_app(split_part(p_tool, '.', 1), format('tool %s', p_tool));
    SELECT producer_traceparent() AS traceparent, producer_tracestate() AS tracestate INTO traced;
    IF traced.traceparent IS NULL THEN
        SELECT t.traceparent, t.tracestate INTO traced FROM tool_calls t
        WHERE t.tool_call_id = p_tool_call_id AND t.conversation_id = p_conversation_id;
    END IF;
    SELECT q.event_id INTO queued
    FROM queue_outbox(ARRAY[ROW(p_conversation_id, p_tool, p_tool_call_id, NULL, p_result,
                                traced.traceparent, traced.tracestate)::outbox_entry_v2]) q;
    RETURN queued;
END $$;

-- app_ask: the acting app's Tool p_tool (the call p_tool_call_id) asks the person forms of its own:
-- a pending interaction owned by the conversation, as interact.ask's is (recording the sub-session
-- of the instance in front when asked), with p_prompt the question as a whole and p_forms one or
-- more forms, {key: {"message": text, "requestedSchema": an MCP elicitation form}}, each answered
-- once (answer_app_form). The forms come from the Tool's manifest ("forms", checked against MCP
-- elicitation's restricted schema when the manifest is loaded), handed to the decision in
-- p_context's "forms"; the engine checks every answer against its form. Once every form is
-- answered, the call's one result ({"state": "answered", "answers", "answered_at"}) goes to the
-- outbox. The caller holds the conversation's lock. Answers the row.
CREATE OR REPLACE FUNCTION app_ask(
    p_conversation_id text, p_tool_call_id text, p_tool text, p_prompt text, p_forms jsonb)
RETURNS interactions
LANGUAGE plpgsql AS $$
DECLARE
    acting text := acting_app();
    asked interactions;
    asked_in uuid;
BEGIN
    IF acting IS NULL OR split_part(p_tool, '.', 1) <> acting THEN
        RAISE EXCEPTION 'a question of tool % is asked by its own app''s decision, not by %', p_tool,
            coalesce(acting, 'a caller outside a Tool call') USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF jsonb_typeof(p_forms) IS DISTINCT FROM 'object' OR p_forms = '{}'::jsonb
       OR EXISTS (SELECT 1 FROM jsonb_each(p_forms) f
                  WHERE jsonb_typeof(f.value -> 'message') IS DISTINCT FROM 'string'
                     OR jsonb_typeof(f.value -> 'requestedSchema') IS DISTINCT FROM 'object') THEN
        RAISE EXCEPTION 'tool % asks one or more forms, each {"message", "requestedSchema"}', p_tool
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT s.sub_session_id INTO asked_in
    FROM workspaces w
    JOIN app_instances i ON i.instance_id = w.foreground_instance_id
                        AND i.conversation_id = w.conversation_id AND i.status = 'open'
    LEFT JOIN sub_sessions s ON s.instance_id = i.instance_id AND s.conversation_id = i.conversation_id
    WHERE w.conversation_id = p_conversation_id;
    INSERT INTO interactions (tool_call_id, conversation_id, prompt, choices, asked_in_sub_session_id,
                              created_at, tool, forms)
    VALUES (p_tool_call_id, p_conversation_id, p_prompt, '[]'::jsonb, asked_in, statement_timestamp(),
            p_tool, p_forms)
    RETURNING * INTO asked;
    RETURN asked;
END $$;

-- question_json: a question asked by app_ask as its Tool's answer shows it (and the Host's views).
-- (plpgsql: a body of SQL would tie the table's row type to it.)
CREATE OR REPLACE FUNCTION question_json(p_asked interactions) RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN jsonb_build_object(
        'tool_call_id', p_asked.tool_call_id,
        'conversation_id', p_asked.conversation_id,
        'prompt', p_asked.prompt,
        'forms', p_asked.forms,
        'status', p_asked.status,
        'asked_in_sub_session_id', p_asked.asked_in_sub_session_id,
        'answers', coalesce(p_asked.answers, '{}'::jsonb),
        'answered_at', rfc3339(p_asked.answered_at));
END $$;

-- question_result: the result of an answered question, as its outbox row carries it (and its task
-- shows it): interact.ask's (interaction_result, its app's SQL: hence plpgsql, resolved when run)
-- or, for an app's forms (p_answers not null), the answers by form.
CREATE OR REPLACE FUNCTION question_result(p_answer text, p_answers jsonb, p_answered_at timestamptz)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    IF p_answers IS NULL THEN
        RETURN interaction_result(p_answer, p_answered_at);
    END IF;
    RETURN jsonb_build_object('state', 'answered', 'answers', p_answers, 'answered_at', rfc3339(p_answered_at));
END $$;

-- answer_app_form: records the person's answers (p_answers: {key: content}, each already checked
-- against its form) to a pending question asked by app_ask, each form once: a form already answered
-- keeps its first answer (compare-and-set on the row: only the keys not yet answered are added).
-- The answer that completes the last form decides the question (pending -> answered) and, in the
-- same transaction, queues the one outbox row of the Tool's call with question_result; `answer`
-- then holds the answers' JSON text (what a reader of the release before shows). No row back:
-- nothing was added (not pending, not a form question, or every given form already answered). The
-- caller holds the conversation's lock.
CREATE OR REPLACE FUNCTION answer_app_form(p_conversation_id text, p_tool_call_id text, p_answers jsonb)
RETURNS SETOF interactions
LANGUAGE plpgsql AS $$
DECLARE
    asked interactions;
    given jsonb;
    merged jsonb;
    complete boolean;
BEGIN
    SELECT * INTO asked FROM interactions i
    WHERE i.tool_call_id = p_tool_call_id AND i.conversation_id = p_conversation_id
      AND i.status = 'pending' AND i.forms IS NOT NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT jsonb_object_agg(a.key, a.value) INTO given
    FROM jsonb_each(p_answers) a
    WHERE asked.forms ? a.key AND NOT coalesce(asked.answers, '{}'::jsonb) ? a.key;
    IF given IS NULL THEN
        RETURN;
    END IF;
    merged := coalesce(asked.answers, '{}'::jsonb) || given;
    complete := NOT EXISTS (SELECT 1 FROM jsonb_object_keys(asked.forms) k WHERE NOT merged ? k);
    UPDATE interactions i
    SET answers = merged,
        status = CASE WHEN complete THEN 'answered' ELSE 'pending' END,
        answer = CASE WHEN complete THEN merged::text END,
        answered_at = CASE WHEN complete THEN statement_timestamp() END
    WHERE i.tool_call_id = p_tool_call_id AND i.conversation_id = p_conversation_id
      AND i.status = 'pending' AND i.answers IS NOT DISTINCT FROM asked.answers
    RETURNING i.* INTO asked;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF complete THEN
        PERFORM app_queue_result(asked.conversation_id, asked.tool, asked.tool_call_id,
                                 question_result(asked.answer, asked.answers, asked.answered_at));
    END IF;
    RETURN NEXT asked;
END $$;
