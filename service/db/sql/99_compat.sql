-- What the previous release calls, kept while it may still serve beside this one (a rolling
-- upgrade runs both against this schema). Everything here goes in the next release's contract step.
-- See README.md in this folder.

-- The interface generations of the database code that this schema serves: each release of the
-- service checks that its own is among them before it reports ready.
CREATE OR REPLACE FUNCTION database_interfaces() RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ARRAY[1, 2, 3, 4];

-- Interface 1 answered with an HTTP status from the database: the status the contract gives each
-- of its outcomes (this release names statuses in its API layer, service/http.py, alone; a test keeps
-- the two equal).
CREATE OR REPLACE FUNCTION interface_1_statuses() RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '{"accepted": 202, "interrupted": 200, "operation_already_final": 200,
         "no_active_focusing_operation": 200, "operation_already_focusing": 409,
         "idempotency_key_reused": 409, "tool_call_expired": 410}'::jsonb;

-- The HTTP status the release before migration 0019 reads in tool_calls.status_code (its operators'
-- lists and traces): the one it passes in p_context's "statuses" for its own calls, else the one the
-- contract gives the outcome (this release's calls, which pass none; expired answers). The database
-- records the outcome word (tool_calls.outcome) and names no status otherwise: this and the column go
-- in the contract release. A test keeps the statuses equal to the API's (service/http.py).
CREATE OR REPLACE FUNCTION compat_status_code(p_outcome text, p_context jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce((p_context -> 'statuses' ->> p_outcome)::integer,
                ((interface_1_statuses() || '{"too_many_requests": 429}'::jsonb) ->> p_outcome)::integer);

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

-- The release before migration 0018 writes snapshots, surface events, delivery attempts and MCP task
-- ids without their conversation_id (the column is new, NOT NULL): it is copied from the row's
-- parent, as the migration did for the rows already there. A row that names it (this release's)
-- skips the trigger.
CREATE OR REPLACE FUNCTION compat_conversation_of_instance() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT a.conversation_id INTO NEW.conversation_id FROM app_instances a
    WHERE a.instance_id = NEW.instance_id;
    RETURN NEW;
END $$;

-- The same for a delivery attempt: its outbox row's conversation.
CREATE OR REPLACE FUNCTION compat_conversation_of_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT o.conversation_id INTO NEW.conversation_id FROM outbox o WHERE o.event_id = NEW.event_id;
    RETURN NEW;
END $$;

-- The same for an MCP task id: its interaction's conversation (the newest of that tool_call_id).
CREATE OR REPLACE FUNCTION compat_conversation_of_interaction() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT i.conversation_id INTO NEW.conversation_id FROM interactions i
    WHERE i.tool_call_id = NEW.tool_call_id
    ORDER BY i.created_at DESC
    LIMIT 1;
    RETURN NEW;
END $$;

-- A snapshot written without its conversation (the release before 0018's open_app).
CREATE OR REPLACE TRIGGER compat_instance_states_conversation BEFORE INSERT ON instance_states
FOR EACH ROW WHEN (NEW.conversation_id IS NULL) EXECUTE FUNCTION compat_conversation_of_instance();

-- A surface event written without its conversation (the release before 0018's Host API).
CREATE OR REPLACE TRIGGER compat_surface_events_conversation BEFORE INSERT ON surface_events
FOR EACH ROW WHEN (NEW.conversation_id IS NULL) EXECUTE FUNCTION compat_conversation_of_instance();

-- A delivery attempt written without its conversation (the release before 0018's relay).
CREATE OR REPLACE TRIGGER compat_outbox_attempts_conversation BEFORE INSERT ON outbox_attempts
FOR EACH ROW WHEN (NEW.conversation_id IS NULL) EXECUTE FUNCTION compat_conversation_of_event();

-- Interface 3's settling (and the release before it): operations named without their conversation;
-- settle_focusing_v2 each conversation's, one after the other.
CREATE OR REPLACE FUNCTION settle_focusing(
    p_operation_ids uuid[], p_state text, p_reason text, p_only_due boolean DEFAULT false)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
DECLARE
    conversation text;
BEGIN
    FOR conversation IN
        SELECT DISTINCT o.conversation_id FROM operations o WHERE o.operation_id = ANY(p_operation_ids)
    LOOP
        RETURN QUERY SELECT * FROM settle_focusing_v2(conversation, p_operation_ids, p_state, p_reason,
                                                      p_only_due);
    END LOOP;
END $$;

-- Interface 3's closing of instances named without their conversation: close_instances_v2 each
-- conversation's.
CREATE OR REPLACE FUNCTION close_instances(
    p_instance_ids uuid[], p_at timestamptz, p_delete_state boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    conversation text;
    closed_count integer := 0;
BEGIN
    FOR conversation IN
        SELECT DISTINCT a.conversation_id FROM app_instances a WHERE a.instance_id = ANY(p_instance_ids)
    LOOP
        closed_count := closed_count
            + close_instances_v2(conversation, p_instance_ids, p_at, p_delete_state);
    END LOOP;
    RETURN closed_count;
END $$;

-- Interface 3's answer, the interaction named by its tool_call_id alone (unique per conversation
-- since migration 0018): the pending one of that id, else any, answered by answer_interaction_v2.
CREATE OR REPLACE FUNCTION answer_interaction(p_tool_call_id text, p_answer text)
RETURNS TABLE (tool_call_id text, conversation_id text, prompt text, choices jsonb, status text,
               asked_in_sub_session_id uuid, answer text, answered_at timestamptz,
               created_at timestamptz, event_id uuid, message_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    conversation text;
BEGIN
    SELECT i.conversation_id INTO conversation FROM interactions i
    WHERE i.tool_call_id = p_tool_call_id
    ORDER BY i.status = 'pending' DESC
    LIMIT 1;
    RETURN QUERY SELECT * FROM answer_interaction_v2(conversation, p_tool_call_id, p_answer);
END $$;

-- An MCP task id written without its conversation (the release before 0018's tasks).
CREATE OR REPLACE TRIGGER compat_interaction_tasks_conversation BEFORE INSERT ON interaction_tasks
FOR EACH ROW WHEN (NEW.conversation_id IS NULL) EXECUTE FUNCTION compat_conversation_of_interaction();

-- The release before migration 0019 records a tool call without its outcome word (the column is
-- new, NOT NULL) while it still runs its own database code (between the migration's commit and
-- that of this code): the word its answer names, as the migration gave the rows already there.
-- Its history retention, likewise, expires an answer without it. This release names it and skips
-- the triggers.
CREATE OR REPLACE FUNCTION compat_outcome_of_answer() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.outcome := coalesce(NEW.response ->> 'status', NEW.response ->> 'error');
    RETURN NEW;
END $$;

-- A tool call recorded without its outcome (the release before 0019's call_tool_v3).
CREATE OR REPLACE TRIGGER compat_tool_calls_outcome BEFORE INSERT ON tool_calls
FOR EACH ROW WHEN (NEW.outcome IS NULL) EXECUTE FUNCTION compat_outcome_of_answer();

-- An answer expired without its outcome (the release before 0019's expire_tool_call_answers).
CREATE OR REPLACE TRIGGER compat_tool_calls_expired_outcome BEFORE UPDATE OF response ON tool_calls
FOR EACH ROW WHEN (NEW.outcome IS NOT DISTINCT FROM OLD.outcome) EXECUTE FUNCTION compat_outcome_of_answer();
