"""Rows the benches put in place with plain SQL: a history of finished Pomodoros (``HISTORY``), a
relay backlog as the service would leave it (``SEED_BACKLOG``), and one result committed as a
deciding transaction commits it (``QUEUE_ONE``). (The throwaway database itself comes from
``harness.database``.)"""

from __future__ import annotations

# A backlog as the service would leave it: `per_conversation` results in each of `conversations`
# conversations, sequenced 1..n, payloads shaped like SETTLE_FOCUSING's.
SEED_BACKLOG = """
WITH ws AS (
    INSERT INTO workspaces (conversation_id, outbox_sequence)
    SELECT %(prefix)s || c, %(per)s FROM generate_series(1, %(conversations)s) c
    RETURNING conversation_id
)
INSERT INTO outbox (event_id, tool, tool_call_id, conversation_id, sequence, payload)
SELECT r.event_id, 'pomodoro.start', r.tool_call_id, r.conversation_id, r.seq,
       jsonb_build_object(
           'event_id', r.event_id, 'type', 'tool.result', 'tool', 'pomodoro.start',
           'tool_call_id', r.tool_call_id, 'conversation_id', r.conversation_id,
           'operation_id', NULL, 'sequence', r.seq,
           'result', jsonb_build_object(
               'state', 'completed', 'reason', 'deadline_reached', 'activity', 'bench',
               'duration_seconds', 1500, 'started_at', '2026-11-30T08:00:00.000000Z',
               'ends_at', '2026-11-30T08:25:00.000000Z', 'finalized_at', '2026-11-30T08:25:00.000000Z',
               'focused_seconds', 1500))
FROM (
    SELECT gen_random_uuid() AS event_id, %(prefix)s || c || '-' || s AS tool_call_id,
           %(prefix)s || c AS conversation_id, s AS seq
    FROM generate_series(1, %(per)s) s, generate_series(1, %(conversations)s) c
    ORDER BY s, c
) r
"""

# One result committed the way a deciding transaction commits it: next sequence under the
# workspace row lock, one outbox row (no NOTIFY: wake-ups are sent after commit).
QUEUE_ONE = """
WITH ws AS (
    INSERT INTO workspaces (conversation_id, outbox_sequence) VALUES (%(conversation_id)s, 1)
    ON CONFLICT (conversation_id) DO UPDATE SET outbox_sequence = workspaces.outbox_sequence + 1
    RETURNING conversation_id, outbox_sequence
)
INSERT INTO outbox (event_id, tool, tool_call_id, conversation_id, sequence, payload)
SELECT r.event_id, 'pomodoro.start', r.tool_call_id, ws.conversation_id, ws.outbox_sequence,
       jsonb_build_object(
           'event_id', r.event_id, 'type', 'tool.result', 'tool', 'pomodoro.start',
           'tool_call_id', r.tool_call_id, 'conversation_id', ws.conversation_id,
           'operation_id', NULL, 'sequence', ws.outbox_sequence,
           'result', jsonb_build_object('state', 'completed', 'reason', 'deadline_reached',
                                        'duration_seconds', 1500, 'focused_seconds', 1500))
FROM ws, (SELECT gen_random_uuid() AS event_id, 'call-' || gen_random_uuid() AS tool_call_id) r
"""

RESET = "TRUNCATE outbox_attempts, outbox, workspaces CASCADE"


# Finished Pomodoros as weeks of use leave them, eight per conversation: each with its instance,
# sub-session, snapshot, operation, two recorded tool calls, its delivered outbox row and attempt.
# Ids are random, as the service makes them; delivered rows are the relay's retention window.
HISTORY = """
WITH r AS (
    SELECT g, 'old-' || (g / 8) AS conversation_id, gen_random_uuid() AS instance_id,
           gen_random_uuid() AS sub_session_id, gen_random_uuid() AS operation_id,
           gen_random_uuid() AS event_id, 'call-' || gen_random_uuid() AS start_id,
           'call-' || gen_random_uuid() AS interrupt_id,
           now() - make_interval(secs => g * 3) - interval '1 hour' AS started_at
    FROM generate_series(1, %(pomodoros)s) g
),
ws AS (
    INSERT INTO workspaces (conversation_id, outbox_sequence)
    SELECT conversation_id, count(*) FROM r GROUP BY conversation_id
),
inst AS (
    INSERT INTO app_instances (instance_id, conversation_id, app_scope, status, opened_at, closed_at)
    SELECT instance_id, conversation_id, 'pomodoro', 'closed', started_at,
           started_at + interval '10 minutes'
    FROM r
),
sub AS (
    INSERT INTO sub_sessions (sub_session_id, instance_id, conversation_id, status, started_at, ended_at)
    SELECT sub_session_id, instance_id, conversation_id, 'ended', started_at,
           started_at + interval '10 minutes'
    FROM r
),
snap AS (
    INSERT INTO instance_states (instance_id, conversation_id, app_scope, schema_version, readonly)
    SELECT instance_id, conversation_id, 'pomodoro', 1, true FROM r
),
ops AS (
    INSERT INTO operations (operation_id, tool, tool_call_id, conversation_id, app_scope, instance_id,
                            state, reason, duration_seconds, activity, started_at, ends_at,
                            finalized_at, result)
    SELECT operation_id, 'pomodoro.start', start_id, conversation_id, 'pomodoro', instance_id,
           'interrupted', 'agent_interrupt', 1500, 'history', started_at,
           started_at + interval '1500 seconds', started_at + interval '10 minutes',
           jsonb_build_object('state', 'interrupted', 'reason', 'agent_interrupt', 'focused_seconds', 600)
    FROM r
),
calls AS (
    INSERT INTO tool_calls (tool_call_id, conversation_id, tool, fingerprint, outcome, response,
                            created_at)
    SELECT id, conversation_id, tool, md5(id) || md5(id), 'accepted', '{"status": "accepted"}'::json,
           started_at
    FROM r, LATERAL (VALUES (start_id, 'pomodoro.start'), (interrupt_id, 'pomodoro.interrupt')) AS c(id, tool)
),
box AS (
    INSERT INTO outbox (event_id, operation_id, tool, tool_call_id, conversation_id, sequence, status,
                        attempts, created_at, delivered_at, payload)
    SELECT event_id, operation_id, 'pomodoro.start', start_id, conversation_id,
           row_number() OVER (PARTITION BY conversation_id ORDER BY g), 'delivered', 1,
           started_at + interval '10 minutes', started_at + interval '10 minutes 1 second',
           jsonb_build_object('type', 'tool.result', 'tool_call_id', start_id)
    FROM r
)
INSERT INTO outbox_attempts (event_id, conversation_id, attempt, relay_id, started_at, duration_ms,
                             status_code, outcome)
SELECT event_id, conversation_id, 1, 'history', started_at + interval '10 minutes', 3, 204, 'delivered' FROM r
"""
