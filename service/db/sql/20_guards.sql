-- Guards: the database itself refuses what the invariants forbid, whatever the code does.

-- A terminal state never changes: neither its state, its reason nor its result.
CREATE OR REPLACE FUNCTION operations_final_is_final() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state <> 'focusing' AND (NEW.state, NEW.reason, NEW.result::text)
            IS DISTINCT FROM (OLD.state, OLD.reason, OLD.result::text) THEN
        RAISE EXCEPTION 'operation % is already %', OLD.operation_id, OLD.state
            USING ERRCODE = 'check_violation', CONSTRAINT = 'operation_final_is_final';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER operations_final_is_final BEFORE UPDATE ON operations
FOR EACH ROW EXECUTE FUNCTION operations_final_is_final();

-- A read-only snapshot never changes and never becomes writable again.
CREATE OR REPLACE FUNCTION instance_states_readonly_is_final() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.readonly AND (NOT NEW.readonly OR NEW.data IS DISTINCT FROM OLD.data
                         OR NEW.revision <> OLD.revision) THEN
        RAISE EXCEPTION 'snapshot of instance % is read-only', OLD.instance_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'instance_state_readonly';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER instance_states_readonly_is_final BEFORE UPDATE ON instance_states
FOR EACH ROW EXECUTE FUNCTION instance_states_readonly_is_final();

-- An ended sub-session never grows, and a message stays in its own conversation. FOR SHARE holds
-- off a concurrent end until this transaction commits.
CREATE OR REPLACE FUNCTION messages_sub_session_open() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    sub record;
BEGIN
    IF NEW.sub_session_id IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT status, conversation_id INTO sub FROM sub_sessions
    WHERE sub_session_id = NEW.sub_session_id AND conversation_id = NEW.conversation_id FOR SHARE;
    IF sub.conversation_id IS DISTINCT FROM NEW.conversation_id THEN
        RAISE EXCEPTION 'sub-session % is not in conversation %', NEW.sub_session_id, NEW.conversation_id
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'message_sub_session_conversation';
    END IF;
    IF sub.status <> 'open' THEN
        RAISE EXCEPTION 'sub-session % has ended', NEW.sub_session_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'sub_session_ended';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER messages_sub_session_open BEFORE INSERT ON messages
FOR EACH ROW EXECUTE FUNCTION messages_sub_session_open();
