-- Guards: the database itself refuses what the invariants forbid, whatever the code does.

-- operations_guard: an operation's row rules, checked on every INSERT and UPDATE of the table, and
-- its lateness_ms kept.
-- A terminal state never changes: neither its state, its reason nor its result. And the rules a
-- CHECK constraint held until migration 0020, each refused under its constraint's name with
-- check_violation in the order Postgres tried them (by name), and passing (as a CHECK does) when
-- its expression is NULL: one trigger with the
-- rules compiled once per session costs a cycle less than eight CHECKs, whose expressions Postgres
-- reads back from the catalog and prepares again at every statement (bench/README.md, "The
-- database's instructions per cycle"). The rules that pass together are tried in one expression.
CREATE OR REPLACE FUNCTION operations_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
    holds boolean;
    changed operations;
    last_seq bigint;
BEGIN
    -- Each expression below is prepared at its first use in a transaction, so the rules are tried
    -- in branches: a transaction prepares the ones its row's state reaches, not all of them (about
    -- 45 k instructions a cycle less, bench/README.md).
    IF TG_OP = 'UPDATE' THEN
        IF OLD.state <> 'focusing' THEN
            IF (NEW.state, NEW.reason, NEW.result::text) IS DISTINCT FROM (OLD.state, OLD.reason, OLD.result::text) THEN
                RAISE EXCEPTION 'operation % is already %', OLD.operation_id, OLD.state
                    USING ERRCODE = 'check_violation', CONSTRAINT = 'operation_final_is_final';
            END IF;
        END IF;
    END IF;
    -- How late a deadline was decided: a stored generated column until migration 0020, whose
    -- expression Postgres, too, read back and prepared at every statement.
    IF NEW.reason = 'deadline_reached' THEN
        NEW.lateness_ms := (EXTRACT(EPOCH FROM NEW.finalized_at - NEW.ends_at) * 1000)::integer;
    ELSE
        NEW.lateness_ms := NULL;
    END IF;
    -- A state with its reason, a final state with its result (a state matches one branch only).
    IF NEW.state = 'focusing' THEN
        holds := NEW.reason IS NULL AND NEW.finalized_at IS NULL AND NEW.result IS NULL;
    ELSIF NEW.state = 'interrupted' THEN
        holds := NEW.reason IN ('agent_interrupt', 'person_interrupt', 'user_left_workspace')
                 AND NEW.finalized_at IS NOT NULL AND NEW.result IS NOT NULL;
    ELSE
        holds := NEW.state = 'completed' AND NEW.reason = 'deadline_reached'
                   AND NEW.finalized_at >= NEW.ends_at AND NEW.result IS NOT NULL
                 OR NEW.state = 'cancelled' AND NEW.reason = 'app_closed'
                   AND NEW.finalized_at IS NOT NULL AND NEW.result IS NOT NULL;
    END IF;
    IF holds
       AND NEW.duration_seconds BETWEEN 1 AND 14400
       AND NEW.ends_at = NEW.started_at + make_interval(secs => NEW.duration_seconds)
       AND (NEW.activity IS NULL OR char_length(NEW.activity) <= 200) THEN
        NULL;  -- every rule holds
    ELSE
        -- Something is wrong, or NULL where a CHECK would pass: each rule as its CHECK was.
        broken := CASE
            WHEN NOT (NEW.activity IS NULL OR char_length(NEW.activity) <= 200)
                THEN 'ck_operations_activity_length'
            WHEN NOT (NEW.state <> 'completed' OR NEW.finalized_at >= NEW.ends_at)
                THEN 'ck_operations_completed_not_early'
            WHEN NOT (NEW.duration_seconds BETWEEN 1 AND 14400)
                THEN 'ck_operations_duration'
            WHEN NOT (NEW.ends_at = NEW.started_at + make_interval(secs => NEW.duration_seconds))
                THEN 'ck_operations_ends_at'
            WHEN NOT (NEW.state = 'focusing' OR NEW.finalized_at IS NOT NULL AND NEW.result IS NOT NULL)
                THEN 'ck_operations_final_has_result'
            WHEN NOT (NEW.reason IS NULL OR NEW.reason IN ('deadline_reached', 'agent_interrupt',
                                                           'person_interrupt', 'user_left_workspace',
                                                           'app_closed'))
                THEN 'ck_operations_reason'
            WHEN NOT (NEW.state IN ('focusing', 'completed', 'interrupted', 'cancelled'))
                THEN 'ck_operations_state'
            WHEN NOT coalesce(NEW.state = 'focusing' AND NEW.reason IS NULL AND NEW.finalized_at IS NULL
                                  AND NEW.result IS NULL
                              OR NEW.state = 'completed' AND NEW.reason = 'deadline_reached'
                              OR NEW.state = 'interrupted'
                                 AND NEW.reason IN ('agent_interrupt', 'person_interrupt',
                                                    'user_left_workspace')
                              OR NEW.state = 'cancelled' AND NEW.reason = 'app_closed', false)
                THEN 'ck_operations_state_matches_reason'
        END;
        IF broken IS NOT NULL THEN
            RAISE EXCEPTION 'new row for relation "operations" violates check constraint "%"', broken
                USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'operations';
        END IF;
    END IF;
    -- The Host's event stream: an operation opened or changed state (30_projections.sql). Written
    -- here, by the trigger every writer of the table already fires, and not by an AFTER trigger of
    -- its own (project_operation until migration 0021), whose queueing and call cost a cycle about
    -- 0.3 M instructions (bench/README.md). The row is final here: this is the table's one BEFORE
    -- trigger, and what it projects is the row as written (a failing statement takes its event
    -- back with it). On Citus the trigger fires on a shard, whose rows are of the shard table's own
    -- type, which no operation_json(operations, text) takes: the row is copied into an `operations`
    -- value first.
    -- project()'s two statements in place (30_projections.sql numbers the events; a call of it is
    -- one more function with its own search_path per event).
    IF TG_OP = 'UPDATE' THEN
        IF NEW.state IS NOT DISTINCT FROM OLD.state THEN
            RETURN NEW;
        END IF;
    END IF;
    changed := NEW;
    SELECT e.event_seq INTO last_seq FROM projection_events e
    WHERE e.conversation_id = NEW.conversation_id
    ORDER BY e.event_seq DESC LIMIT 1;
    INSERT INTO projection_events (conversation_id, event_seq, kind, payload)
    VALUES (NEW.conversation_id,
            greatest(coalesce(last_seq, 0) + 1,
                     (EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::bigint),
            'operation', operation_json(changed, 'event'));
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER operations_guard BEFORE INSERT OR UPDATE ON operations
FOR EACH ROW EXECUTE FUNCTION operations_guard();

-- workspaces_guard: a workspace's row rules, as its CHECKs held them until migration 0020 (the
-- same names, check_violation, NULL passing); its row is written two or three times per tool call.
CREATE OR REPLACE FUNCTION workspaces_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    last_seq bigint;
BEGIN
    IF char_length(NEW.conversation_id) BETWEEN 1 AND 255 AND NEW.outbox_sequence >= 0 THEN
        NULL;  -- both rules hold
    ELSIF NOT (char_length(NEW.conversation_id) BETWEEN 1 AND 255) THEN
        RAISE EXCEPTION 'new row for relation "workspaces" violates check constraint "%"',
            'ck_workspaces_conversation_id_length'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_workspaces_conversation_id_length',
                  TABLE = 'workspaces';
    ELSIF NOT (NEW.outbox_sequence >= 0) THEN
        RAISE EXCEPTION 'new row for relation "workspaces" violates check constraint "%"',
            'ck_workspaces_outbox_sequence_nonnegative'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_workspaces_outbox_sequence_nonnegative',
                  TABLE = 'workspaces';
    END IF;
    -- The Host's event stream: the foreground changed (30_projections.sql), whoever changed it (a
    -- decision, close_instances_v2, the Host's switch, the previous release's). Written here, by
    -- the trigger every writer of the row fires anyway, not by an AFTER trigger of its own
    -- (project_workspace until migration 0021, whose queueing and call cost a cycle about 0.2 M
    -- instructions, bench/README.md). The row is final here (the table's one BEFORE trigger); a
    -- failing statement takes its event back with it.
    -- project()'s two statements in place, as operations_guard has them.
    IF TG_OP = 'UPDATE' THEN
        IF NEW.foreground_instance_id IS DISTINCT FROM OLD.foreground_instance_id THEN
            SELECT e.event_seq INTO last_seq FROM projection_events e
            WHERE e.conversation_id = NEW.conversation_id
            ORDER BY e.event_seq DESC LIMIT 1;
            INSERT INTO projection_events (conversation_id, event_seq, kind, payload)
            VALUES (NEW.conversation_id,
                    greatest(coalesce(last_seq, 0) + 1,
                             (EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::bigint),
                    'workspace', jsonb_build_object('foreground_instance_id', NEW.foreground_instance_id));
        END IF;
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER workspaces_guard BEFORE INSERT OR UPDATE ON workspaces
FOR EACH ROW EXECUTE FUNCTION workspaces_guard();

-- tool_calls_guard: a recorded tool call's row rules, as its CHECKs held them until migration 0021
-- (the same names, check_violation, tried in the order Postgres tried them — by name — and NULL
-- passing): every tool call inserts one row, and three CHECKs read back from the catalog and
-- prepared again at each INSERT cost more than a trigger compiled once per session (the third,
-- ck_tool_calls_status_code, went with its column in migration 0023).
-- The outcome word's rule, ^[a-z][a-z0-9_]{0,62}$, is tried on the way through as a length and
-- ^[a-z][a-z0-9_]*$, the same rule: the bounded repetition {0,62} builds a 62-state automaton at
-- every match, about 30 k instructions a tool call (bench/README.md); the refusal below keeps it.
CREATE OR REPLACE FUNCTION tool_calls_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
BEGIN
    IF char_length(NEW.tool_call_id) BETWEEN 1 AND 255
       AND char_length(NEW.outcome) <= 63 AND NEW.outcome ~ '^[a-z][a-z0-9_]*$' THEN
        RETURN NEW;
    END IF;
    broken := CASE
        WHEN NOT (NEW.outcome ~ '^[a-z][a-z0-9_]{0,62}$') THEN 'ck_tool_calls_outcome_word'
        WHEN NOT (char_length(NEW.tool_call_id) BETWEEN 1 AND 255) THEN 'ck_tool_calls_tool_call_id_length'
    END;
    IF broken IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "tool_calls" violates check constraint "%"', broken
            USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'tool_calls';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER tool_calls_guard BEFORE INSERT OR UPDATE ON tool_calls
FOR EACH ROW EXECUTE FUNCTION tool_calls_guard();

-- app_instances_guard: an instance's row rules, as its CHECKs held them until migration 0022 (the
-- same names, check_violation, tried in the order Postgres tried them — by name — and NULL
-- passing): a cycle inserts an instance and closes it, and two CHECKs read back from the catalog
-- and prepared again at each statement cost more than this trigger (bench/README.md).
CREATE OR REPLACE FUNCTION app_instances_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'open' AND NEW.closed_at IS NULL OR NEW.status = 'closed' AND NEW.closed_at IS NOT NULL THEN
        RETURN NEW;  -- both rules hold
    ELSIF NOT ((NEW.status = 'closed') = (NEW.closed_at IS NOT NULL)) THEN
        RAISE EXCEPTION 'new row for relation "app_instances" violates check constraint "%"',
            'ck_app_instances_closed_at_iff_closed'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_app_instances_closed_at_iff_closed',
                  TABLE = 'app_instances';
    ELSIF NOT (NEW.status = ANY ('{open,closed}'::text[])) THEN
        RAISE EXCEPTION 'new row for relation "app_instances" violates check constraint "%"',
            'ck_app_instances_status'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_app_instances_status',
                  TABLE = 'app_instances';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER app_instances_guard BEFORE INSERT OR UPDATE ON app_instances
FOR EACH ROW EXECUTE FUNCTION app_instances_guard();

-- sub_sessions_guard: a sub-session's row rules, as its CHECKs held them until migration 0022, the
-- same way (a cycle starts a sub-session and ends it).
CREATE OR REPLACE FUNCTION sub_sessions_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'open' AND NEW.ended_at IS NULL OR NEW.status = 'ended' AND NEW.ended_at IS NOT NULL THEN
        RETURN NEW;  -- both rules hold
    ELSIF NOT ((NEW.status = 'ended') = (NEW.ended_at IS NOT NULL)) THEN
        RAISE EXCEPTION 'new row for relation "sub_sessions" violates check constraint "%"',
            'ck_sub_sessions_ended_at_iff_ended'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_sub_sessions_ended_at_iff_ended',
                  TABLE = 'sub_sessions';
    ELSIF NOT (NEW.status = ANY ('{open,ended}'::text[])) THEN
        RAISE EXCEPTION 'new row for relation "sub_sessions" violates check constraint "%"',
            'ck_sub_sessions_status'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_sub_sessions_status',
                  TABLE = 'sub_sessions';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER sub_sessions_guard BEFORE INSERT OR UPDATE ON sub_sessions
FOR EACH ROW EXECUTE FUNCTION sub_sessions_guard();

-- instance_states_readonly_is_final: a read-only snapshot never changes and never becomes writable
-- again; and a snapshot's row rules, as its CHECKs held them until migration 0022 (the same names,
-- check_violation, tried in the order Postgres tried them — by name — and NULL passing): a cycle
-- inserts and updates one snapshot, and two CHECKs read back from the catalog and prepared again
-- at each statement cost more than the rules in this trigger, which an UPDATE fired anyway.
CREATE OR REPLACE FUNCTION instance_states_readonly_is_final() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF OLD.readonly THEN
            IF NOT NEW.readonly OR NEW.data IS DISTINCT FROM OLD.data OR NEW.revision <> OLD.revision THEN
                RAISE EXCEPTION 'snapshot of instance % is read-only', OLD.instance_id
                    USING ERRCODE = 'check_violation', CONSTRAINT = 'instance_state_readonly';
            END IF;
        END IF;
    END IF;
    IF jsonb_typeof(NEW.data) = 'object' AND NEW.revision >= 0 THEN
        RETURN NEW;  -- both rules hold
    ELSIF NOT (jsonb_typeof(NEW.data) = 'object') THEN
        RAISE EXCEPTION 'new row for relation "instance_states" violates check constraint "%"',
            'ck_instance_states_data_is_object'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_instance_states_data_is_object',
                  TABLE = 'instance_states';
    ELSIF NOT (NEW.revision >= 0) THEN
        RAISE EXCEPTION 'new row for relation "instance_states" violates check constraint "%"',
            'ck_instance_states_revision_nonnegative'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_instance_states_revision_nonnegative',
                  TABLE = 'instance_states';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER instance_states_readonly_is_final BEFORE INSERT OR UPDATE ON instance_states
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
