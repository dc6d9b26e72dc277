"""Steps the table migrations share (``migrations/versions/``): the locks a migration takes while
the release before still serves, and the database code it makes ahead of ``migrate``'s.

    with own_connection() as conn, conn.transaction():  # committed before migrate's database code
        lock_tables(conn, ("workspaces", "operations"))   # LOCK TABLE ... ACCESS EXCLUSIVE, retried
        make_code(conn, (("trigger", "operations.operations_guard"), ...), citus_triggers=True)
        ...                                                # the migration's own statements

:func:`lock_tables` and :func:`make_code` run in the caller's transaction, :func:`lock_tables` first.

A migration is history: migrations 0018, 0019 and 0020 (and later ones) run these functions as they
are now whenever a database is migrated from before them. **Changing what they execute, in what
order, or how they retry changes those old migrations**: keep their behaviour, or add a new
function for a new need.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from typing import Any

import psycopg
from alembic import op

from service.db import code

#: Each try's lock_timeout: below deadlock_timeout, so the migration gives way before a deadlock is found.
LOCK_TIMEOUT = "200ms"
#: Tries before the last ``LockNotAvailable`` is raised (about 75 s, with the timeouts and pauses).
LOCK_ATTEMPTS = 300
#: The pause between two tries, in seconds.
LOCK_PAUSE = 0.05


@contextlib.contextmanager
def own_connection() -> Iterator[psycopg.Connection[Any]]:
    """The running migration's psycopg connection, outside Alembic's transaction
    (``op.get_context().autocommit_block()``): what the migration runs in a ``with
    conn.transaction():`` of its own commits at that block's end, before the database code
    ``migrate`` applies next, so the release still serving waits on the migration's locks only that
    long; a statement outside such a block runs on its own (autocommit)."""
    with op.get_context().autocommit_block():
        conn = op.get_bind().connection.driver_connection
        assert isinstance(conn, psycopg.Connection)
        yield conn


def lock_tables(conn: psycopg.Connection[Any], tables: Iterable[str]) -> None:
    """``LOCK TABLE <tables> IN ACCESS EXCLUSIVE MODE``, all at once or none, in the order given
    (give the order every use case locks them in): each try runs in a savepoint under
    ``lock_timeout = LOCK_TIMEOUT``; a try that times out gives back what it took and, after
    ``LOCK_PAUSE``, is made again, so the release still serving waits a moment instead of failing or
    deadlocking. After ``LOCK_ATTEMPTS`` tries the last ``psycopg.errors.LockNotAvailable`` is
    raised. Once locked, ``lock_timeout`` is 0 again for the rest of the transaction."""
    statement = f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE"
    conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    for attempt in range(LOCK_ATTEMPTS):
        try:
            with conn.transaction():
                conn.execute(statement)
        except psycopg.errors.LockNotAvailable:
            if attempt == LOCK_ATTEMPTS - 1:
                raise
            time.sleep(LOCK_PAUSE)
            continue
        break
    conn.execute("SET LOCAL lock_timeout = 0")


def make_code(
    conn: psycopg.Connection[Any], keys: Iterable[tuple[str, str]], *, citus_triggers: bool = False
) -> None:
    """Make the database code named by ``keys`` (``(kind, name)``, a trigger's name being
    ``"table.trigger"``, as ``service.db.code.Definition.key``) from its one source,
    ``service/db/sql/*.sql``, in the order given, and record each as ``migrate`` records it
    (``service.db.code.record``), so that the database code applied next finds it in place and does
    not replace it (a replaced trigger locks its table until that transaction commits: the release
    still serving would wait on it mid-call).

    Function bodies are not checked when made (``check_function_bodies = off``). With
    ``citus_triggers``, the session is set up as ``migrate`` sets it (``service.db.code.prepare``):
    on Citus, triggers on distributed tables may then be made — pass it when the code holds a
    trigger on a table that may be distributed."""
    if citus_triggers:
        code.prepare(conn)
    else:
        conn.execute("SET LOCAL check_function_bodies = off")
    wanted = {d.key: d for d in code.definitions(code.SOURCE, ())}
    for key in keys:
        definition = wanted[key]
        conn.execute(definition.sql)
        code.record(conn, definition)
