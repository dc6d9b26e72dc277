"""The relay benches' SQL: a backlog as the service would leave it, and one result committed as a
deciding transaction commits it. (The throwaway database itself comes from ``bench.common``.)"""

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
