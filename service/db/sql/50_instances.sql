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
DECLARE
    new_instance uuid := uuid_v7();
    new_sub_session uuid := uuid_v7();
    opened_count integer;
BEGIN
    WITH instance AS (
        INSERT INTO app_instances (instance_id, conversation_id, app_scope, opened_at)
        VALUES (new_instance, p_conversation_id, p_app_scope, statement_timestamp())
        RETURNING instance_id
    ),
    sub_session AS (
        INSERT INTO sub_sessions (sub_session_id, instance_id, conversation_id, started_at)
        SELECT new_sub_session, i.instance_id, p_conversation_id, statement_timestamp() FROM instance i
    ),
    snapshot AS (
        INSERT INTO instance_states (instance_id, app_scope, schema_version)
        SELECT i.instance_id, p_app_scope, p_schema_version FROM instance i
        WHERE p_schema_version IS NOT NULL
    )
    SELECT count(*) FROM instance INTO STRICT opened_count;
    instance_id := new_instance;
    sub_session_id := new_sub_session;
END $$;

-- close_instances: closes the open instances among p_instance_ids at p_at. Each one's sub-session
-- ends, its snapshot becomes read-only history (or is deleted, p_delete_state, for apps whose state
-- does not outlive them), and a conversation whose foreground it held gets Interact back. Instances
-- already closed are left as they are. Answers how many it closed.
CREATE OR REPLACE FUNCTION close_instances(
    p_instance_ids uuid[], p_at timestamptz, p_delete_state boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    closed_count integer;
BEGIN
    WITH closed AS (
        UPDATE app_instances SET status = 'closed', closed_at = p_at
        WHERE instance_id = ANY(p_instance_ids) AND status = 'open'
        RETURNING instance_id, conversation_id
    ),
    ended AS (
        UPDATE sub_sessions ss SET status = 'ended', ended_at = p_at
        FROM closed c
        WHERE ss.instance_id = c.instance_id AND ss.status = 'open'
    ),
    frozen AS (
        UPDATE instance_states st SET readonly = true, updated_at = p_at
        FROM closed c
        WHERE st.instance_id = c.instance_id AND NOT p_delete_state AND NOT st.readonly
    ),
    deleted AS (
        DELETE FROM instance_states st USING closed c
        WHERE st.instance_id = c.instance_id AND p_delete_state
    ),
    released AS (
        UPDATE workspaces w SET foreground_instance_id = NULL, updated_at = p_at
        FROM closed c
        WHERE w.conversation_id = c.conversation_id AND w.foreground_instance_id = c.instance_id
    )
    SELECT count(*) INTO closed_count FROM closed;
    RETURN closed_count;
END $$;
