-- App instances: the one way an instance opens and the one way it closes. The caller holds the
-- conversation's lock (lock_workspace).

-- open_instance: an instance of p_app_scope in the conversation, with its sub-session and — when
-- the app keeps state (p_schema_version is not null) — its empty snapshot. The caller brings it to
-- the foreground once what it opens it for exists (the event stream shows that first).
CREATE OR REPLACE FUNCTION open_instance(
    p_conversation_id text, p_app_scope text, p_schema_version integer,
    OUT instance_id uuid, OUT sub_session_id uuid)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    -- Plain statements, each on the conversation's rows only (no data-modifying CTE: Citus would
    -- plan one with intermediate results sent between its nodes).
    instance_id := uuid_v7();
    sub_session_id := uuid_v7();
    INSERT INTO app_instances (instance_id, conversation_id, app_scope, opened_at)
    VALUES (open_instance.instance_id, p_conversation_id, p_app_scope, statement_timestamp());
    INSERT INTO sub_sessions (sub_session_id, instance_id, conversation_id, started_at)
    VALUES (open_instance.sub_session_id, open_instance.instance_id, p_conversation_id,
            statement_timestamp());
    IF p_schema_version IS NOT NULL THEN
        INSERT INTO instance_states (instance_id, conversation_id, app_scope, schema_version)
        VALUES (open_instance.instance_id, p_conversation_id, p_app_scope, p_schema_version);
    END IF;
END $$;

-- close_instances_v2: closes the open instances among p_instance_ids of the conversation at p_at.
-- Each one's sub-session ends, its snapshot becomes read-only history (or is deleted,
-- p_delete_state, for apps whose state does not outlive them), and the conversation gets Interact
-- back in front if one of them held it. Instances already closed are left as they are. Answers how
-- many it closed.
CREATE OR REPLACE FUNCTION close_instances_v2(
    p_conversation_id text, p_instance_ids uuid[], p_at timestamptz, p_delete_state boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    closed uuid[];
    one uuid;
BEGIN
    -- Instance by instance (one, mostly), each statement on one row: a statement over
    -- `= ANY(...)` was planned again at every call (its plan for any array never looked cheaper
    -- than the one for this array, about 60 k instructions each), and a loop over an UPDATE's
    -- RETURNING runs through a cursor (bench/README.md).
    FOREACH one IN ARRAY coalesce(p_instance_ids, '{}') LOOP
        UPDATE app_instances SET status = 'closed', closed_at = p_at
        WHERE conversation_id = p_conversation_id AND instance_id = one AND status = 'open';
        IF FOUND THEN
            closed := closed || one;
            UPDATE sub_sessions SET status = 'ended', ended_at = p_at
            WHERE conversation_id = p_conversation_id AND instance_id = one AND status = 'open';
            IF p_delete_state THEN
                DELETE FROM instance_states WHERE conversation_id = p_conversation_id AND instance_id = one;
            ELSE
                UPDATE instance_states SET readonly = true, updated_at = p_at
                WHERE conversation_id = p_conversation_id AND instance_id = one AND NOT readonly;
            END IF;
        END IF;
    END LOOP;
    IF closed IS NULL THEN
        RETURN 0;
    END IF;
    UPDATE workspaces SET foreground_instance_id = NULL, updated_at = p_at
    WHERE conversation_id = p_conversation_id AND foreground_instance_id = ANY(closed);
    RETURN cardinality(closed);
END $$;
