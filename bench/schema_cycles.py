"""The cycle ``bench.schema_cost`` runs with pgbench: the databases, the tables a cycle writes, and
the scripts (a start in each slot; then interrupt, deliver with the relay's own statements, start
again)."""

from __future__ import annotations

from bench.sql_ceiling import INTERRUPT_SQL, START_SQL
from relay.claims import CLAIM, RECORD_OUTCOMES
from service.domain.delivery import AGENT_ENDPOINT

DATABASE = "schema_cost"
VARIANT = "schema_cost_variant"
# The tables a cycle writes; every other table is left alone.
CYCLE_TABLES = (
    "workspaces",
    "app_instances",
    "sub_sessions",
    "instance_states",
    "operations",
    "tool_calls",
    "outbox",
    "outbox_attempts",
    "projection_events",
)

# --- the cycle: each client keeps SLOTS conversations focusing and, per cycle, interrupts the one
# it started SLOTS cycles ago, delivers that result, and starts a new period there. So a row is
# settled long after it was written, as in production (a Pomodoro lasts 25 minutes), when the pages
# around it have filled up: whether an update can stay on its page (HOT) is decided as it would be.

SLOTS = 100
CONVERSATION = "'pgb-' || :client_id::text"
# Each run names its conversations afresh (-D run=N): the tables keep the history of every run.
SLOT_CONVERSATION = "('pgb-' || :run::text || '-' || :client_id::text || '-' || :slot::text)"
NEXT_SLOT = "\\set n :n + 1\n\\set slot :n % " + str(SLOTS) + "\n"


def _one_line(statement: str) -> str:
    """pgbench ends a statement at a semicolon or at ``\\gset``; one line each keeps that simple."""
    return " ".join(statement.split())


def _in_slot(statement: str) -> str:
    assert CONVERSATION in statement
    return statement.replace(CONVERSATION, SLOT_CONVERSATION)


def _claim_sql() -> str:
    """``relay.claims.CLAIM`` for the client's conversation (its head-of-line row)."""
    bound = CLAIM.replace(
        "AND o.next_attempt_at <= now()",
        f"AND o.next_attempt_at <= now() AND o.conversation_id = {CONVERSATION}",
        1,
    )
    assert CONVERSATION in bound, "the claim's due condition moved"
    for name, value in {
        "%(endpoint)s": f"'{AGENT_ENDPOINT}'",
        "%(busy)s::uuid[]": "'{}'::uuid[]",
        "%(limit)s": "1",
        "%(relay_id)s": "'pgbench'",
        "%(lease_seconds)s": "30",
    }.items():
        bound = bound.replace(name, value)
    assert "%(" not in bound, "CLAIM has parameters this bench does not bind"
    return bound


def _record_sql() -> str:
    """``relay.claims.RECORD_OUTCOMES`` for the one row just claimed, delivered (a 204)."""
    bound = RECORD_OUTCOMES
    row = (
        ":event_id::uuid, :lease_expires_at::timestamptz, 'delivered', 0, NULL, now(), 3, 204, NULL, NULL, 0"
    )
    for name, value in {
        "%(outcomes)s::jsonb": f"jsonb_build_array(jsonb_build_array({row}))",
        "%(relay_id)s": "'pgbench'",
        "%%": "%",
    }.items():
        bound = bound.replace(name, value)
    assert "%(" not in bound, "RECORD_OUTCOMES has parameters this bench does not bind"
    return bound


def prime_script() -> str:
    """A start in each slot, run once per slot before the measured cycles."""
    return NEXT_SLOT + _one_line(_in_slot(START_SQL)) + "\n"


def cycle_script() -> str:
    """Interrupt the slot's period, deliver its result (claim, record), start a new one there."""
    return (
        NEXT_SLOT
        + "\n".join(
            [
                _one_line(_in_slot(INTERRUPT_SQL)),
                _one_line(_in_slot(_claim_sql())).rstrip(";") + " \\gset",
                _one_line(_record_sql()).rstrip(";") + ";",
                _one_line(_in_slot(START_SQL)),
            ]
        )
        + "\n"
    )


def tables_sql() -> str:
    return "(" + ", ".join(f"'{t}'" for t in CYCLE_TABLES) + ")"


SIZES = f"""
SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid)
FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND c.relname IN {tables_sql()}
ORDER BY pg_total_relation_size(c.oid) DESC
"""
