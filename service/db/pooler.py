"""Whether a database URL leads through a pooler in transaction mode, and what that rules out.

A pooler in transaction mode (PgBouncer ``pool_mode=transaction``, most managed poolers) lends a
client a server connection for one transaction only, so nothing that lives in a session holds:
server-side prepared statements (PgBouncer 1.18 has no support for them: another client's
statement of the same name may run with this client's parameters) and ``LISTEN``.

The pooler cannot be asked (``SHOW`` goes to the server), but its mode can be proven from the
outside. In a session of its own (directly, or through a pooler in session mode), a connection's
backend is its own while it is open: no other connection ever gets it. So: connection A runs one
statement (backend ``a``, which a transaction pooler then gives back), connection B opens a
transaction (backend ``b``, held), and A runs a statement again (backend ``a2``). ``b == a`` or
``a2 != a`` cannot happen in a session of one's own: either proves transaction pooling. PgBouncer
reuses the server connection released last (``server_round_robin=0``), so B gets ``a`` at once
unless another client takes it in between; the probe tries ``ATTEMPTS`` times. It never answers
"transaction pooler" for a session of one's own.
"""

from __future__ import annotations

from typing import Any

import psycopg

from service.db.reconnect import PatientConnection, session_ended

ATTEMPTS = 5
ENDED_RETRIES = 3
PROBE_NAME = "lineup-pooler-probe"


async def _pid(conn: psycopg.AsyncConnection[Any]) -> int:
    cursor = await conn.execute("SELECT pg_backend_pid()", prepare=False)
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def transaction_pooling(url: str, *, attempts: int = ATTEMPTS) -> bool:
    """True when ``url`` is proven to lead through a pooler in transaction mode (see the module).
    Its connections ride out a restart or a failover as the pools' do (``PatientConnection``), and
    a probe whose transaction the server ended — idle past the role's bound while the other
    connection's statement crossed a slow, lossy link — is made again, on new connections."""
    for _ in range(ENDED_RETRIES):
        try:
            return await _probe(url, attempts)
        except psycopg.InternalError as error:
            if not session_ended(error):
                raise
    return await _probe(url, attempts)


async def _probe(url: str, attempts: int) -> bool:
    options: dict[str, Any] = {"autocommit": True, "application_name": PROBE_NAME, "prepare_threshold": None}
    async with (
        await PatientConnection.connect(url, **options) as first,
        await PatientConnection.connect(url, **options) as second,
    ):
        for _ in range(attempts):
            before = await _pid(first)
            async with second.transaction():
                held = await _pid(second)
                after = await _pid(first)
            if held == before or after != before:
                return True
    return False


def pooler_refusal(*, transaction_pooled: bool, prepared: bool) -> str | None:
    """Why a process must not start with these settings, in a sentence naming the setting; or None."""
    if transaction_pooled and prepared:
        return (
            "DATABASE_URL leads through a connection pooler in transaction mode, which cannot carry "
            "server-side prepared statements: set DB_PREPARED_STATEMENTS=off (docs/operations.md, "
            "Connection poolers)"
        )
    return None


class PoolerRefusalError(Exception):
    """The process must not start behind this pooler with these settings; the message says why."""
