-- Guards: the database itself refuses what the invariants forbid, whatever the code does.

-- operations_guard: a new operation is held to what its Tool declares in its manifest (app_tools,
-- 75_app_api.sql): one_running marked from the declaration, for the unique index
-- uq_operations_one_running_per_tool, and a deadline at most max_seconds away. A terminal state
-- never changes (neither its state, its reason nor its result), and lateness_ms is kept.
-- And the operation's row rules, the one exception to "a row's rules are its CHECK constraints"
-- (every other table's are, again, since migration 0024): each is refused under the name of the
-- CHECK that held it until migration 0020, with check_violation, in the order Postgres tried them
-- (by name), and passing (as a CHECK does) when its expression is NULL. Eight CHECKs, whose
-- expressions Postgres reads back from the catalog and prepares again at every statement (here an
-- INSERT and an UPDATE a cycle), cost a start+interrupt cycle 0.82 M database instructions, 18 % of
-- it, against this trigger's rules compiled once per session (bench/README.md, "The database's
-- instructions per cycle"; migration 0024). The rules that pass together are tried in one
-- expression; service/db/tables/workspaces.py lists them beside the table. `failed` (an app's
-- decision, 75_app_api.sql) and its error (`failure`) came in migration 0029, additively: every row
-- the rules allowed before they still allow, and the release before never writes `failed`; the
-- error's rule is named as the others are (ck_operations_failure), though no CHECK ever held it.
CREATE OR REPLACE FUNCTION operations_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
    holds boolean;
    changed operations;
    last_seq bigint;
    max_seconds integer;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT t.one_running, t.max_seconds INTO NEW.one_running, max_seconds
        FROM app_tools t WHERE t.tool = NEW.tool;
        -- (A duration no operation may have is ck_operations_duration's to refuse, under its name.)
        IF NEW.duration_seconds > max_seconds AND NEW.duration_seconds <= 14400 THEN
            RAISE EXCEPTION 'tool % declares deadlines at most % seconds away, not %', NEW.tool, max_seconds,
                NEW.duration_seconds
                USING ERRCODE = 'check_violation', CONSTRAINT = 'operation_declared_max_seconds';
        END IF;
    ELSIF OLD.state <> 'focusing' THEN
        IF (NEW.state, NEW.reason, NEW.result::text) IS DISTINCT FROM (OLD.state, OLD.reason, OLD.result::text) THEN
            RAISE EXCEPTION 'operation % is already %', OLD.operation_id, OLD.state
                USING ERRCODE = 'check_violation', CONSTRAINT = 'operation_final_is_final';
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
                   AND NEW.finalized_at >= NEW.ends_at AND NEW.result IS NOT NULL AND NEW.failure IS NULL
                 OR NEW.state = 'cancelled' AND NEW.reason = 'app_closed'
                   AND NEW.finalized_at IS NOT NULL AND NEW.result IS NOT NULL
                 OR NEW.state = 'failed' AND NEW.reason IN ('deadline_reached', 'app_failed')
                   AND NEW.finalized_at IS NOT NULL AND NEW.result IS NOT NULL
                   AND NEW.failure IS NOT NULL;
    END IF;
    -- The error's shape (ck_operations_failure), tried only where there is one.
    IF holds AND NEW.failure IS NOT NULL THEN
        holds := operation_failure_holds(NEW.failure);
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
            WHEN NOT (NEW.failure IS NULL OR operation_failure_holds(NEW.failure))
                   OR NEW.state = 'failed' AND NEW.failure IS NULL
                   OR NEW.state = 'completed' AND NEW.failure IS NOT NULL
                THEN 'ck_operations_failure'
            WHEN NOT (NEW.state = 'focusing' OR NEW.finalized_at IS NOT NULL AND NEW.result IS NOT NULL)
                THEN 'ck_operations_final_has_result'
            WHEN NOT (NEW.reason IS NULL OR NEW.reason IN ('deadline_reached', 'agent_interrupt',
                                                           'person_interrupt', 'user_left_workspace',
                                                           'app_closed', 'app_failed'))
                THEN 'ck_operations_reason'
            WHEN NOT (NEW.state IN ('focusing', 'completed', 'interrupted', 'cancelled', 'failed'))
                THEN 'ck_operations_state'
            WHEN NOT coalesce(NEW.state = 'focusing' AND NEW.reason IS NULL AND NEW.finalized_at IS NULL
                                  AND NEW.result IS NULL
                              OR NEW.state = 'completed' AND NEW.reason = 'deadline_reached'
                              OR NEW.state = 'interrupted'
                                 AND NEW.reason IN ('agent_interrupt', 'person_interrupt',
                                                    'user_left_workspace')
                              OR NEW.state = 'cancelled' AND NEW.reason = 'app_closed'
                              OR NEW.state = 'failed' AND NEW.reason IN ('deadline_reached', 'app_failed'),
                              false)
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

-- operation_failure_holds: an operation's error is {"code": an outcome word (^[a-z][a-z0-9_]*$, at
-- most 63 characters), "message": text of 1 to 500 characters}, nothing else (ck_operations_failure).
CREATE OR REPLACE FUNCTION operation_failure_holds(p_failure jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN jsonb_typeof(p_failure) = 'object'
    AND (SELECT count(*) FROM jsonb_object_keys(p_failure)) = 2
    AND jsonb_typeof(p_failure -> 'code') = 'string'
    AND char_length(p_failure ->> 'code') <= 63 AND (p_failure ->> 'code') ~ '^[a-z][a-z0-9_]*$'
    AND jsonb_typeof(p_failure -> 'message') = 'string'
    AND char_length(p_failure ->> 'message') BETWEEN 1 AND 500;

CREATE OR REPLACE TRIGGER operations_guard BEFORE INSERT OR UPDATE ON operations
FOR EACH ROW EXECUTE FUNCTION operations_guard();

-- workspaces_guard: the Host's event stream when the foreground changes; the row's own rules are its
-- CHECK constraints (service/db/tables/workspaces.py; imitated here between migrations 0020 and 0024).
CREATE OR REPLACE FUNCTION workspaces_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    last_seq bigint;
BEGIN
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

-- instance_states_readonly_is_final: a read-only snapshot never changes and never becomes writable
-- again (the row's own rules are its CHECK constraints, service/db/tables/workspaces.py).
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
