-- lock_workspace: the one lock order. Every use case that changes a conversation takes its
-- workspaces row first, here, so requests, sweepers and replicas never deadlock. FOR NO KEY UPDATE
-- is the strength of the row's own UPDATEs: it excludes every other writer of the conversation and
-- still lets the foreign-key checks of new rows (instances, operations) through. With p_create the
-- workspace is made on first use; without it a conversation never seen answers false.
CREATE OR REPLACE FUNCTION lock_workspace(p_conversation_id text, p_create boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM workspaces WHERE conversation_id = p_conversation_id FOR NO KEY UPDATE;
    IF FOUND THEN
        RETURN true;
    ELSIF NOT p_create THEN
        RETURN false;
    END IF;
    -- A concurrent creator makes this wait for its commit, then do nothing; the lock follows.
    INSERT INTO workspaces (conversation_id) VALUES (p_conversation_id) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM workspaces WHERE conversation_id = p_conversation_id FOR NO KEY UPDATE;
    RETURN true;
END $$;
