-- Write limits: what a conversation or a person's session may write per window.

-- spend_write: counts one write of p_bytes of p_kind against each principal's allowance in the
-- current fixed window (p_window_seconds long, aligned on 2000-01-01), in the caller's transaction.
-- Answers NULL when every principal is still within p_max_writes and p_max_bytes, else the seconds
-- until the window ends: the caller then refuses the write and rolls back, and this count with it.
-- One row per (principal, kind), rewritten in place; principals are locked in the order given
-- (the conversation, whose workspace lock the caller holds, then the session).
CREATE OR REPLACE FUNCTION spend_write(
    p_principals text[], p_kind text, p_bytes bigint, p_window_seconds integer,
    p_max_writes integer, p_max_bytes bigint)
RETURNS double precision
LANGUAGE plpgsql AS $$
DECLARE
    this_window timestamptz := date_bin(make_interval(secs => p_window_seconds), statement_timestamp(),
                                         TIMESTAMPTZ '2000-01-01 00:00:00+00');
    who text;
    spent record;
    over boolean := false;
BEGIN
    -- One principal per statement, in the order given (each on its own row: on Citus, its shard).
    FOREACH who IN ARRAY p_principals LOOP
        INSERT INTO write_allowances AS a (principal, kind, window_start, writes, bytes)
        VALUES (who, p_kind, this_window, 1, p_bytes)
        ON CONFLICT (principal, kind) DO UPDATE
        SET window_start = excluded.window_start,
            writes = CASE WHEN a.window_start = excluded.window_start THEN a.writes + 1 ELSE 1 END,
            bytes = CASE WHEN a.window_start = excluded.window_start
                         THEN a.bytes + excluded.bytes ELSE excluded.bytes END
        RETURNING a.writes, a.bytes INTO spent;
        over := over OR spent.writes > p_max_writes OR spent.bytes > p_max_bytes;
    END LOOP;
    IF over THEN
        RETURN EXTRACT(EPOCH FROM this_window + make_interval(secs => p_window_seconds)
                                  - statement_timestamp())::float8;
    END IF;
    RETURN NULL;
END $$;
