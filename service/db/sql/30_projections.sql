-- Projections: what the Host's event streams show, written in the deciding transaction. Nothing
-- here notifies: the process that committed wakes the streams after the commit (service/wakeups.py).

-- One projection event of a conversation, numbered by the conversation's own sequence: the one
-- after its last event, and never below the moment's microseconds since 1970, so the numbers keep
-- increasing even once retention has removed every earlier event of the conversation, and wherever
-- the conversation's rows are (a Citus shard moved to another worker keeps them). Every writer of a
-- conversation holds its workspace lock (lock_workspace), so the numbers follow commit order.
-- operations_guard and workspaces_guard (20_guards.sql) hold the same two statements in place.
CREATE OR REPLACE FUNCTION project(conversation text, kind text, payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    last_seq bigint;
BEGIN
    SELECT e.event_seq INTO last_seq FROM projection_events e
    WHERE e.conversation_id = conversation
    ORDER BY e.event_seq DESC LIMIT 1;
    INSERT INTO projection_events (conversation_id, event_seq, kind, payload)
    VALUES (conversation,
            greatest(coalesce(last_seq, 0) + 1,
                     (EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::bigint),
            kind, payload);
END $$;

-- An operation opened or changed state, and the foreground changed: written by the tables' guards
-- (operations_guard, workspaces_guard, 20_guards.sql), the BEFORE triggers every writer of those
-- rows fires anyway; AFTER triggers of their own (project_operation, project_workspace) until
-- migration 0021.

-- A message was posted.
CREATE OR REPLACE FUNCTION project_message() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM project(NEW.conversation_id, 'message', jsonb_build_object(
        'message_id', NEW.message_id, 'conversation_id', NEW.conversation_id,
        'sub_session_id', NEW.sub_session_id, 'role', NEW.role, 'text', NEW.text,
        'created_at', rfc3339(NEW.created_at)));
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER project_message AFTER INSERT ON messages
FOR EACH ROW EXECUTE FUNCTION project_message();

-- An interaction was asked or answered (an app's question of forms also when one of its forms is:
-- it carries its forms and the answers so far besides).
CREATE OR REPLACE FUNCTION project_interaction() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM project(NEW.conversation_id, 'interaction', jsonb_build_object(
        'tool_call_id', NEW.tool_call_id, 'conversation_id', NEW.conversation_id,
        'prompt', NEW.prompt, 'choices', NEW.choices, 'status', NEW.status,
        'asked_in_sub_session_id', NEW.asked_in_sub_session_id, 'answer', NEW.answer,
        'answered_at', rfc3339(NEW.answered_at))
        || CASE WHEN NEW.forms IS NULL THEN '{}'::jsonb
                ELSE jsonb_build_object('forms', NEW.forms, 'answers', coalesce(NEW.answers, '{}'::jsonb))
           END);
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER project_interaction AFTER INSERT OR UPDATE OF status ON interactions
FOR EACH ROW EXECUTE FUNCTION project_interaction();
