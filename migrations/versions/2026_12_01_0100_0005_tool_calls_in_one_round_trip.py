"""tool calls in one round trip; no NOTIFY inside a deciding transaction

Every Agent tool call becomes one call of ``call_tool(...)``: the idempotency lookup, the
conversation's workspace lock, the decision, the recorded answer and the outbox row, in the one
implicit transaction of one statement. ``settle_focusing(...)`` is the one compare-and-set every
ending goes through (tool calls, the Host's leave and close, the sweeper's ``settle_due``).

The NOTIFYs that triggers and statements sent from inside deciding transactions are gone: every
NOTIFYing commit takes one cluster-wide lock, which serialised all of them. Processes now wake each
other after commit, coalesced (``service/wakeups.py``); polling stays the safety net.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 01:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The compare-and-set, as a query over ``decision``: the focusing rows it settles, each with the
# state and reason it would end with. It decides by the database clock: arriving at or after
# ends_at settles `completed` whatever the caller asked for. Only rows still focusing are touched,
# so of several concurrent callers exactly one gets a row back; in the same statement the winner
# closes the instance, ends its sub-session, freezes the snapshot, hands the foreground back to
# Interact and queues the one outbox row under the conversation's next sequence number.
# (bench/tool_cycles.py builds its raw-SQL baseline from this very text.)
SETTLE_CTES = """
decision AS (
    SELECT o.operation_id,
           CASE WHEN o.ends_at <= statement_timestamp() THEN 'completed' ELSE p_state END AS state,
           CASE WHEN o.ends_at <= statement_timestamp() THEN 'deadline_reached' ELSE p_reason END
               AS reason,
           statement_timestamp() AS decided_at
    FROM operations o
    WHERE o.operation_id = ANY(p_operation_ids)
      AND o.state = 'focusing'
      AND (NOT p_only_due OR o.ends_at <= statement_timestamp())
),
settled AS (
    UPDATE operations o
    SET state = d.state,
        reason = d.reason,
        finalized_at = d.decided_at,
        result = jsonb_build_object(
            'state', d.state,
            'reason', d.reason,
            'activity', o.activity,
            'duration_seconds', o.duration_seconds,
            'started_at', rfc3339(o.started_at),
            'ends_at', rfc3339(o.ends_at),
            'finalized_at', rfc3339(d.decided_at),
            'focused_seconds', LEAST(
                o.duration_seconds,
                floor(EXTRACT(EPOCH FROM d.decided_at - o.started_at))::integer))
    FROM decision d
    WHERE o.operation_id = d.operation_id AND o.state = 'focusing'
    RETURNING o.*
),
closed_instances AS (
    UPDATE app_instances i SET status = 'closed', closed_at = s.finalized_at
    FROM settled s
    WHERE i.instance_id = s.instance_id AND i.status = 'open'
    RETURNING i.instance_id
),
ended_sub_sessions AS (
    UPDATE sub_sessions ss SET status = 'ended', ended_at = s.finalized_at
    FROM settled s
    WHERE ss.instance_id = s.instance_id AND ss.status = 'open'
    RETURNING ss.sub_session_id
),
frozen_states AS (
    UPDATE instance_states st SET readonly = true, updated_at = s.finalized_at
    FROM settled s
    WHERE st.instance_id = s.instance_id AND NOT st.readonly
    RETURNING st.instance_id
),
sequenced AS (
    UPDATE workspaces w
    SET outbox_sequence = w.outbox_sequence + 1,
        foreground_instance_id = CASE WHEN w.foreground_instance_id = s.instance_id
                                      THEN NULL ELSE w.foreground_instance_id END,
        updated_at = s.finalized_at
    FROM settled s
    WHERE w.conversation_id = s.conversation_id
    RETURNING w.conversation_id, w.outbox_sequence
),
events AS (
    SELECT gen_random_uuid() AS event_id, s.operation_id, s.tool, s.tool_call_id,
           s.conversation_id, s.result, q.outbox_sequence
    FROM settled s JOIN sequenced q USING (conversation_id)
),
queued AS (
    INSERT INTO outbox (event_id, operation_id, tool, tool_call_id, conversation_id, sequence, payload)
    SELECT e.event_id, e.operation_id, e.tool, e.tool_call_id, e.conversation_id, e.outbox_sequence,
           jsonb_build_object(
               'event_id', e.event_id, 'type', 'tool.result', 'tool', e.tool,
               'tool_call_id', e.tool_call_id, 'conversation_id', e.conversation_id,
               'operation_id', e.operation_id, 'sequence', e.outbox_sequence, 'result', e.result)
    FROM events e
    RETURNING event_id, operation_id
)"""

# One settled operation: what callers count, log and answer with.
SETTLED_OPERATION = """
CREATE TYPE settled_operation AS (
    operation_id uuid, conversation_id text, instance_id uuid, state text, reason text,
    ends_at timestamptz, finalized_at timestamptz, lateness_ms integer, event_id uuid)
"""

SETTLE_FOCUSING = f"""
CREATE FUNCTION settle_focusing(
    p_operation_ids uuid[], p_state text, p_reason text, p_only_due boolean DEFAULT false)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH {SETTLE_CTES}
    SELECT s.operation_id, s.conversation_id, s.instance_id, s.state, s.reason, s.ends_at,
           s.finalized_at, s.lateness_ms, q.event_id
    FROM settled s JOIN queued q USING (operation_id);
END $$
"""

# The sweeper's batch: due operations whose conversation nobody else is changing right now. It
# locks the workspace rows (the lock every use case takes first), so it never deadlocks with a
# request, and SKIP LOCKED lets several claimers, in one replica or many, settle side by side
# without ever taking the same row.
SETTLE_DUE = """
CREATE FUNCTION settle_due(p_limit integer)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT * FROM settle_focusing(ARRAY(
        SELECT o.operation_id
        FROM operations o
        JOIN workspaces w ON w.conversation_id = o.conversation_id
        WHERE o.state = 'focusing' AND o.ends_at <= statement_timestamp()
        ORDER BY o.ends_at
        LIMIT p_limit
        FOR UPDATE OF w SKIP LOCKED), 'completed', 'deadline_reached', true);
END $$
"""

# The one rule of the late interrupt: `operation_already_final` when the conversation's latest
# operation logically ended (ends_at for `completed`, the decision otherwise) within the window.
LATE_INTERRUPT_STATUS = """
CREATE FUNCTION late_interrupt_status(
    p_state text, p_ends_at timestamptz, p_finalized_at timestamptz, p_now timestamptz,
    p_window interval)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN p_state <> 'focusing'
         AND p_now - CASE WHEN p_state = 'completed' THEN p_ends_at ELSE p_finalized_at END <= p_window
    THEN 'operation_already_final'
    ELSE 'no_active_focusing_operation'
END
"""

# Every use case that changes a conversation takes its workspace row lock first (one lock order,
# no deadlocks). FOR NO KEY UPDATE is the strength of the row's own UPDATEs: it excludes every
# other writer and still lets foreign-key checks of new rows through. Returns false when the
# workspace does not exist and ``p_create`` is false.
LOCK_WORKSPACE = """
CREATE FUNCTION lock_workspace(p_conversation_id text, p_create boolean)
RETURNS boolean
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
END $$
"""

SETTLE_IF_OVERDUE = """
CREATE FUNCTION settle_if_overdue(p_conversation_id text)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
DECLARE
    overdue uuid;
BEGIN
    SELECT o.operation_id INTO overdue FROM operations o
    WHERE o.conversation_id = p_conversation_id AND o.state = 'focusing'
      AND o.tool = 'pomodoro.start' AND o.ends_at <= statement_timestamp();
    IF FOUND THEN
        RETURN QUERY SELECT * FROM settle_focusing(ARRAY[overdue], 'completed', 'deadline_reached', true);
    END IF;
END $$
"""

# What a tool's function answers: the status and body, the outcome word for metrics and logs, the
# deadline of an operation it opened, and the one operation it settled, if any.
TOOL_ANSWER = """
CREATE TYPE tool_answer AS (
    status_code integer,
    response jsonb,
    outcome text,
    deadline timestamptz,
    settled settled_operation
)
"""

POMODORO_START = """
CREATE FUNCTION pomodoro_start(
    p_tool_call_id text, p_conversation_id text, p_arguments jsonb, p_schema_version integer)
RETURNS tool_answer
LANGUAGE plpgsql AS $$
DECLARE
    answer tool_answer;
    settled settled_operation;
    focusing record;
    started record;
    new_instance uuid := gen_random_uuid();
    new_sub_session uuid := gen_random_uuid();
    new_operation uuid := gen_random_uuid();
    duration integer := (p_arguments ->> 'duration_seconds')::numeric::integer;
BEGIN
    PERFORM lock_workspace(p_conversation_id, true);
    SELECT o.operation_id, o.ends_at <= statement_timestamp() AS overdue INTO focusing
    FROM operations o
    WHERE o.conversation_id = p_conversation_id AND o.state = 'focusing' AND o.tool = 'pomodoro.start';
    IF FOUND THEN
        IF NOT focusing.overdue THEN
            answer.status_code := 409;
            answer.outcome := 'operation_already_focusing';
            answer.response := jsonb_build_object(
                'error', 'operation_already_focusing',
                'message', 'a Pomodoro focus period is already running in this conversation',
                'operation_id', focusing.operation_id);
            RETURN answer;
        END IF;
        -- Its deadline has passed: that fact is settled before the new period opens.
        SELECT * INTO settled
        FROM settle_focusing(ARRAY[focusing.operation_id], 'completed', 'deadline_reached', true);
        answer.settled := settled;
    END IF;
    WITH instance AS (
        INSERT INTO app_instances (instance_id, conversation_id, app_scope, opened_at)
        VALUES (new_instance, p_conversation_id, 'pomodoro', statement_timestamp())
        RETURNING instance_id
    ),
    sub_session AS (
        INSERT INTO sub_sessions (sub_session_id, instance_id, conversation_id, started_at)
        SELECT new_sub_session, i.instance_id, p_conversation_id, statement_timestamp() FROM instance i
    ),
    snapshot AS (
        INSERT INTO instance_states (instance_id, app_scope, schema_version)
        SELECT i.instance_id, 'pomodoro', p_schema_version FROM instance i
    ),
    operation AS (
        INSERT INTO operations (operation_id, tool, tool_call_id, conversation_id, app_scope,
                                instance_id, duration_seconds, activity, started_at, ends_at)
        SELECT new_operation, 'pomodoro.start', p_tool_call_id, p_conversation_id, 'pomodoro',
               i.instance_id, duration, p_arguments ->> 'activity', statement_timestamp(),
               statement_timestamp() + make_interval(secs => duration)
        FROM instance i
        RETURNING operations.state, operations.started_at, operations.ends_at,
                  operations.duration_seconds, operations.activity
    ),
    foreground AS (
        UPDATE workspaces SET foreground_instance_id = new_instance, updated_at = statement_timestamp()
        WHERE workspaces.conversation_id = p_conversation_id
    )
    SELECT * INTO STRICT started FROM operation;
    answer.status_code := 202;
    answer.outcome := 'accepted';
    answer.deadline := started.ends_at;
    answer.response := jsonb_build_object(
        'tool_call_id', p_tool_call_id,
        'status', 'accepted',
        'operation', jsonb_build_object(
            'operation_id', new_operation,
            'state', started.state,
            'started_at', rfc3339(started.started_at),
            'ends_at', rfc3339(started.ends_at),
            'duration_seconds', started.duration_seconds,
            'activity', started.activity),
        'instance_id', new_instance,
        'sub_session_id', new_sub_session);
    RETURN answer;
END $$
"""

# Bound to the conversation's one focusing Pomodoro; the caller never names a target.
POMODORO_INTERRUPT = """
CREATE FUNCTION pomodoro_interrupt(p_tool_call_id text, p_conversation_id text, p_window interval)
RETURNS tool_answer
LANGUAGE plpgsql AS $$
DECLARE
    answer tool_answer;
    settled settled_operation;
    focusing uuid;
    latest record;
BEGIN
    answer.status_code := 200;
    IF lock_workspace(p_conversation_id, false) THEN
        SELECT o.operation_id INTO focusing FROM operations o
        WHERE o.conversation_id = p_conversation_id AND o.state = 'focusing'
          AND o.tool = 'pomodoro.start';
        IF FOUND THEN
            SELECT * INTO settled
            FROM settle_focusing(ARRAY[focusing], 'interrupted', 'agent_interrupt');
            answer.settled := settled;
            IF settled.state = 'interrupted' THEN
                answer.outcome := 'interrupted';
                answer.response := jsonb_build_object(
                    'tool_call_id', p_tool_call_id, 'status', 'interrupted',
                    'operation_id', settled.operation_id);
                RETURN answer;
            END IF;
        END IF;
    END IF;
    SELECT o.operation_id, o.state,
           late_interrupt_status(o.state, o.ends_at, o.finalized_at, statement_timestamp(), p_window)
               AS status
    INTO latest
    FROM operations o
    WHERE o.conversation_id = p_conversation_id AND o.tool = 'pomodoro.start'
    ORDER BY o.started_at DESC
    LIMIT 1;
    IF FOUND AND latest.status = 'operation_already_final' THEN
        answer.outcome := latest.status;
        answer.response := jsonb_build_object(
            'tool_call_id', p_tool_call_id, 'status', latest.status,
            'operation_id', latest.operation_id, 'final_state', latest.state);
    ELSE
        answer.outcome := 'no_active_focusing_operation';
        answer.response := jsonb_build_object(
            'tool_call_id', p_tool_call_id, 'status', 'no_active_focusing_operation');
    END IF;
    RETURN answer;
END $$
"""

# An interaction belongs to the conversation; it records the sub-session of the app instance in
# the foreground when asked (a Pomodoro whose deadline passed is settled first: it is no longer
# in front).
INTERACT_ASK = """
CREATE FUNCTION interact_ask(p_tool_call_id text, p_conversation_id text, p_arguments jsonb)
RETURNS tool_answer
LANGUAGE plpgsql AS $$
DECLARE
    answer tool_answer;
    settled settled_operation;
    asked record;
    asked_in uuid;
BEGIN
    PERFORM lock_workspace(p_conversation_id, true);
    SELECT * INTO settled FROM settle_if_overdue(p_conversation_id);
    answer.settled := settled;
    SELECT s.sub_session_id INTO asked_in
    FROM workspaces w
    JOIN app_instances i ON i.instance_id = w.foreground_instance_id AND i.status = 'open'
    LEFT JOIN sub_sessions s ON s.instance_id = i.instance_id
    WHERE w.conversation_id = p_conversation_id;
    INSERT INTO interactions (tool_call_id, conversation_id, prompt, choices,
                              asked_in_sub_session_id, created_at)
    VALUES (p_tool_call_id, p_conversation_id, p_arguments ->> 'prompt',
            coalesce(p_arguments -> 'choices', '[]'::jsonb), asked_in, statement_timestamp())
    RETURNING * INTO asked;
    answer.status_code := 202;
    answer.outcome := 'accepted';
    answer.response := jsonb_build_object(
        'tool_call_id', p_tool_call_id,
        'status', 'accepted',
        'interaction', jsonb_build_object(
            'tool_call_id', asked.tool_call_id,
            'conversation_id', asked.conversation_id,
            'prompt', asked.prompt,
            'choices', asked.choices,
            'status', asked.status,
            'asked_in_sub_session_id', asked.asked_in_sub_session_id));
    RETURN answer;
END $$
"""

# POST /v1/tool-calls in one statement: exactly one answer per tool_call_id. The same id with the
# same body (fingerprint) replays the recorded status and body byte for byte; another body is
# `409 idempotency_key_reused`. A concurrent call with the same id waits on the tool_calls key
# until the first commits, then fails with a unique violation: the caller runs it again and
# replays. The answer's text is what is both recorded and sent.
CALL_TOOL = """
CREATE FUNCTION call_tool(
    p_tool_call_id text, p_conversation_id text, p_tool text, p_fingerprint text,
    p_arguments jsonb, p_late_window_seconds double precision, p_state_schema_version integer)
RETURNS TABLE (status_code integer, response text, outcome text, replayed boolean,
               deadline timestamptz, settled_operation_id uuid, settled_state text,
               settled_reason text, settled_lateness_ms integer, settled_event_id uuid)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    recorded record;
    answer tool_answer;
    body text;
BEGIN
    SELECT t.fingerprint, t.status_code, t.response INTO recorded
    FROM tool_calls t WHERE t.tool_call_id = p_tool_call_id;
    IF FOUND THEN
        IF recorded.fingerprint <> p_fingerprint THEN
            RETURN QUERY SELECT 409,
                jsonb_build_object(
                    'error', 'idempotency_key_reused',
                    'message', 'this tool_call_id was already used with a different request body')::text,
                'idempotency_key_reused', false, NULL::timestamptz, NULL::uuid, NULL::text, NULL::text,
                NULL::integer, NULL::uuid;
        ELSE
            RETURN QUERY SELECT recorded.status_code, recorded.response::text,
                coalesce(recorded.response ->> 'status', recorded.response ->> 'error'), true,
                NULL::timestamptz, NULL::uuid, NULL::text, NULL::text, NULL::integer, NULL::uuid;
        END IF;
        RETURN;
    END IF;
    CASE p_tool
        WHEN 'pomodoro.start' THEN
            answer := pomodoro_start(p_tool_call_id, p_conversation_id, p_arguments,
                                     p_state_schema_version);
        WHEN 'pomodoro.interrupt' THEN
            answer := pomodoro_interrupt(p_tool_call_id, p_conversation_id,
                                         make_interval(secs => p_late_window_seconds));
        WHEN 'interact.ask' THEN
            answer := interact_ask(p_tool_call_id, p_conversation_id, p_arguments);
        ELSE
            RAISE EXCEPTION 'no tool named %', p_tool USING ERRCODE = 'invalid_parameter_value';
    END CASE;
    body := answer.response::text;
    INSERT INTO tool_calls (tool_call_id, conversation_id, tool, fingerprint, status_code, response)
    VALUES (p_tool_call_id, p_conversation_id, p_tool, p_fingerprint, answer.status_code, body::json);
    RETURN QUERY SELECT answer.status_code, body, answer.outcome, false, answer.deadline,
        (answer.settled).operation_id, (answer.settled).state, (answer.settled).reason,
        (answer.settled).lateness_ms, (answer.settled).event_id;
END $$
"""

# Projection rows are still written in the deciding transaction; the wake-up is sent after commit.
PROJECT_WITHOUT_NOTIFY = """
CREATE OR REPLACE FUNCTION project(conversation text, kind text, payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO projection_events (conversation_id, kind, payload) VALUES (conversation, kind, payload);
END $$
"""


def upgrade() -> None:
    op.execute("DROP TRIGGER outbox_notify ON outbox")
    op.execute("DROP FUNCTION outbox_notify()")
    op.execute(PROJECT_WITHOUT_NOTIFY)
    for statement in (
        SETTLED_OPERATION,
        SETTLE_FOCUSING,
        SETTLE_DUE,
        LATE_INTERRUPT_STATUS,
        LOCK_WORKSPACE,
        SETTLE_IF_OVERDUE,
        TOOL_ANSWER,
        POMODORO_START,
        POMODORO_INTERRUPT,
        INTERACT_ASK,
        CALL_TOOL,
    ):
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
