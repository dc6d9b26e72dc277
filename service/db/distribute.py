"""``python -m service distribute``: the migrated schema spread over a Citus cluster, every
conversation's rows on one shard (docs/scaling.md).

Run on the coordinator, after ``migrate`` (and again after each ``migrate``: a run with nothing left
to do changes nothing). In the order the cluster accepts:

1. the foreign keys between tables that are not all Citus tables yet are set aside (a table with a
   foreign key to a table Citus does not manage cannot be distributed, and a local table that
   references a reference table becomes a "Citus local table" whose keys can no longer be dropped);
2. the small tables read everywhere become **reference tables** (copied to every node);
3. the tables of conversation data are **distributed by ``conversation_id``**, co-located with
   ``workspaces`` (``write_allowances`` and ``outbox_tallies`` by their own keys); rows already
   there move to the shards;
4. the keys set aside are made again, now between Citus tables;
5. the database code is made known to every node, and the functions a request calls with a
   conversation (``call_tool_v3``, …) are **distributed by their conversation argument**: the
   coordinator hands each such call whole to the worker that holds the conversation.

On a server without the ``citus`` extension in the database it refuses, and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg

Connection = psycopg.Connection[Any]

#: The co-location group's first table: the others follow it.
ANCHOR = "workspaces"
#: Conversation data: distributed by conversation_id, co-located with ANCHOR (anchor first).
BY_CONVERSATION = (
    "workspaces",
    "app_instances",
    "sub_sessions",
    "instance_states",
    "operations",
    "tool_calls",
    "outbox",
    "outbox_attempts",
    "capabilities",
    "surface_events",
    "messages",
    "interactions",
    "interaction_tasks",
    "projection_events",
)
#: Few rows, read by every node (a session names up to 1,000 conversations; the endpoint's pause
#: and circuit gate every claim; one row each for the retention reports; the schema's revision,
#: which a relay on a worker checks before it reports ready; what each Tool declares).
REFERENCE = (
    "host_sessions",
    "console_sessions",
    "delivery_endpoints",
    "outbox_retention",
    "history_retention",
    "alembic_version",
    # What each Tool declares of its operations: read by operations_guard on the shard's node.
    "app_tools",
)
#: Distributed by a key of their own, co-located with nothing: (table, column).
OWN_KEY = (("write_allowances", "principal"), ("outbox_tallies", "shard"))
#: Kept on the coordinator, where ``migrate`` runs: which database code it applied.
COORDINATOR = ("database_code",)

#: Functions called with one conversation: (the function, its conversation argument). A call of
#: one of them is delegated whole to the worker holding that conversation's shard.
BY_CONVERSATION_FUNCTIONS = (
    ("call_tool_v3(text, text, text, text, jsonb, regproc, jsonb)", "p_conversation_id"),
    ("settle_due_in(text)", "p_conversation_id"),
    ("settle_due_in_traced(text, text, text)", "p_conversation_id"),
    ("prune_conversation(text, timestamp with time zone)", "p_conversation_id"),
)


class NotCitusError(Exception):
    """The database has no ``citus`` extension: nothing to distribute over."""


@dataclass
class Outcome:
    changes: list[str] = field(default_factory=list)

    def did(self, change: str) -> None:
        self.changes.append(change)


def _citus_version(conn: Connection) -> str | None:
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()
    return None if row is None else str(row[0])


def citus_tables(conn: Connection) -> dict[str, str]:
    """The Citus tables of the database, each with its kind: ``distributed``, ``reference``,
    ``local`` (a Citus local table)."""
    rows = conn.execute(
        """
        SELECT logicalrelid::regclass::text,
               CASE WHEN partmethod = 'h' THEN 'distributed'
                    WHEN repmodel = 't' THEN 'reference' ELSE 'local' END
        FROM pg_dist_partition
        WHERE logicalrelid::regclass::text NOT LIKE 'pg_%'
        """
    ).fetchall()
    return {str(name): str(kind) for name, kind in rows}


def _foreign_keys(conn: Connection, tables: Iterable[str]) -> list[tuple[str, str, str]]:
    """(table, name, definition) of each foreign key from or to one of ``tables``."""
    rows = conn.execute(
        """
        SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)
        FROM pg_constraint c
        WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
          AND (c.conrelid::regclass::text = ANY(%(tables)s) OR c.confrelid::regclass::text = ANY(%(tables)s))
        ORDER BY 1, 2
        """,
        {"tables": list(tables)},
    ).fetchall()
    return [(str(t), str(n), str(d)) for t, n, d in rows]


def _functions(conn: Connection) -> list[str]:
    """Every function of the database code, as ``name(argument types)``: those ``migrate`` applied
    (``database_code``: the engine's and those of the apps it ran with)."""
    rows = conn.execute(
        """
        SELECT p.oid::regprocedure::text FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace
          AND p.proname IN (SELECT name FROM database_code WHERE kind = 'function')
        ORDER BY 1
        """
    ).fetchall()
    return [str(row[0]) for row in rows]


def _distributed_functions(conn: Connection) -> dict[str, str | None]:
    """Functions Citus knows, each with its distribution argument's position (None: none)."""
    rows = conn.execute(
        """
        SELECT objid::regprocedure::text, distribution_argument_index
        FROM pg_catalog.pg_dist_object
        WHERE classid = 'pg_proc'::regclass
        """
    ).fetchall()
    return {str(name): (None if index is None else str(index)) for name, index in rows}


def distribute(conn: Connection) -> Outcome:
    """Bring ``conn``'s database (a Citus coordinator's) to its distributed shape; idempotent.
    ``conn`` is in autocommit mode: each step commits on its own, as Citus needs for moving data."""
    outcome = Outcome()
    if _citus_version(conn) is None:
        raise NotCitusError(
            "this database has no citus extension (CREATE EXTENSION citus, as a superuser, on the"
            " coordinator and on every worker, then citus_set_coordinator_host and citus_add_node):"
            " nothing was changed"
        )
    # Triggers (the guards, the projections) on distributed tables: each fires on its shard and
    # touches only the co-located shards of the same conversation.
    conn.execute("SET citus.enable_unsafe_triggers = on")
    present = citus_tables(conn)
    wanted = {**dict.fromkeys(REFERENCE, "reference"), **dict.fromkeys(BY_CONVERSATION, "distributed")}
    wanted.update({table: "distributed" for table, _ in OWN_KEY})
    misplaced = {t: kind for t, kind in present.items() if t in wanted and kind != wanted[t]}
    if misplaced:
        raise RuntimeError(
            f"tables already in Citus in another shape than planned: {misplaced}; undistribute them"
            " (undistribute_table) and run distribute again"
        )
    pending = [t for t in wanted if t not in present]
    if pending:
        _place_tables(conn, pending, outcome)
    _place_functions(conn, outcome)
    return outcome


def _place_tables(conn: Connection, pending: list[str], outcome: Outcome) -> None:
    set_aside = _foreign_keys(conn, pending)
    for table, name, _ in set_aside:
        conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
        outcome.did(f"set aside foreign key {name}")
    for table in REFERENCE:
        if table in pending:
            conn.execute("SELECT create_reference_table(%s)", (table,))
            outcome.did(f"reference table {table}")
    for table, column in OWN_KEY:
        if table in pending:
            conn.execute("SELECT create_distributed_table(%s, %s, colocate_with => 'none')", (table, column))
            outcome.did(f"distributed {table} by {column}")
    for table in BY_CONVERSATION:
        if table in pending:
            colocate = "default" if table == ANCHOR else ANCHOR
            conn.execute(
                "SELECT create_distributed_table(%s, 'conversation_id', colocate_with => %s)",
                (table, colocate),
            )
            outcome.did(f"distributed {table} by conversation_id")
    for table in pending:
        # The rows a non-empty table had stay behind in the coordinator's own copy once copied to
        # the shards: they are removed (the table now reads from its shards only).
        conn.execute("SELECT truncate_local_data_after_distributing_table(%s)", (table,))
    for table, name, definition in set_aside:
        conn.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
        outcome.did(f"foreign key {name} again")


def _place_functions(conn: Connection, outcome: Outcome) -> None:
    known = _distributed_functions(conn)
    by_conversation = dict(BY_CONVERSATION_FUNCTIONS)
    for function in _functions(conn):
        wanted_argument = next(
            (arg for signature, arg in by_conversation.items() if _same_function(signature, function)), None
        )
        if function in known and (wanted_argument is None or known[function] is not None):
            continue
        if wanted_argument is None:
            conn.execute("SELECT create_distributed_function(%s)", (function,))
            outcome.did(f"function {function} on every node")
        else:
            conn.execute(
                "SELECT create_distributed_function(%s, %s, colocate_with => %s)",
                (function, wanted_argument, ANCHOR),
            )
            outcome.did(f"function {function} delegated by {wanted_argument}")


def _same_function(signature: str, regprocedure: str) -> bool:
    """``call_tool_v3(text, …)`` names the same function as Postgres's ``call_tool_v3(text,…)``."""
    return signature.replace(" ", "") == regprocedure.replace(" ", "")
