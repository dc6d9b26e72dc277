"""Each database role's limits (``python -m service roles``, ``service.db.roles.limit``): its
``CONNECTION LIMIT`` and, in the service's database, ``statement_timeout``,
``idle_in_transaction_session_timeout`` and ``temp_file_limit``; ``DB_ROLE_LIMITS`` changes them.
A module of its own: the settings check ``DB_ROLE_LIMITS`` with it, and it imports nothing of the
service."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OWNER, RUNTIME, RELAY, READER = "owner", "runtime", "relay", "reader"
KINDS = (OWNER, RUNTIME, RELAY, READER)


@dataclass(frozen=True, slots=True)
class Limits:
    """What one role may hold and spend: connections (cluster-wide, -1: no limit) and, in this
    database, the longest statement, the longest idle transaction ("0": no limit) and the temporary
    files of one session ("-1": no limit), in Postgres's units ("60s", "1GB")."""

    connection_limit: int
    statement_timeout: str
    idle_in_transaction_session_timeout: str
    temp_file_limit: str

    def settings(self) -> dict[str, str]:
        return {
            "statement_timeout": self.statement_timeout,
            "idle_in_transaction_session_timeout": self.idle_in_transaction_session_timeout,
            "temp_file_limit": self.temp_file_limit,
        }


#: Each role's limits unless ``DB_ROLE_LIMITS`` says otherwise (docs/operations.md, "Database roles").
#: owner: ``migrate`` rewrites tables and builds indexes for as long as that takes, and waits for
#: its locks in its own transaction between tries, so no statement, idle or temporary-file bound;
#: a few connections (migrate takes one or two). runtime: every ``serve`` replica holds its pool
#: (DB_POOL_SIZE, 10) and about four more (LISTEN, wake-ups, sweeper), so 300 fit twenty replicas;
#: its statements are single rows, a conversation or batches of at most 1,000 rows, so a minute is
#: far past any of them (a statement that runs longer waits on a lock it will not get soon: it
#: fails, is logged and retried, rather than hold a connection of the pool). No transaction of the
#: service waits on anything but the database, so one idle for 5 s has lost its client: a replica
#: partitioned from the database with a conversation's lock held (the Host's leave and close take
#: it first) would otherwise keep the lock — and every deadline of that conversation unsettled —
#: until TCP gives the connection up, minutes later; 5 s ends that transaction and frees the lock
#: (a transaction waits this long between its statements only past a round trip's and an event
#: loop's worst). relay: a pool of 4 and a LISTEN per relay, so 100 fit twenty relays; its claims,
#: records and prunes are statements of at most RELAY_BATCH_SIZE (1000) rows, each in autocommit,
#: and it never holds a transaction open while it delivers (the claim is a lease in the row, not a
#: lock), so the same minute and 5 s. Neither gets an ``idle_session_timeout``: a pooled connection
#: waits idle for its next request and a LISTEN connection for its notifications, by design.
#: reader: operators' and dashboards' reads, the least trusted: 20 connections, a minute per
#: statement (and a minute idle in a transaction: a person at psql) and 256 MB of temporary files.
DEFAULT_LIMITS: dict[str, Limits] = {
    OWNER: Limits(10, "0", "0", "-1"),
    RUNTIME: Limits(300, "60s", "5s", "1GB"),
    RELAY: Limits(100, "60s", "5s", "1GB"),
    READER: Limits(20, "60s", "60s", "256MB"),
}

_LIMIT_FIELDS = (
    "connection_limit",
    "statement_timeout",
    "idle_in_transaction_session_timeout",
    "temp_file_limit",
)


def parse_limits(value: str | None) -> dict[str, Limits]:
    """``DB_ROLE_LIMITS``: ``<kind>.<limit>=<value>`` items separated by spaces or commas over
    :data:`DEFAULT_LIMITS`, e.g. ``runtime.connection_limit=600 reader.statement_timeout=5min``.
    Raises ValueError naming what is wrong."""
    limits = {kind: dict(zip(_LIMIT_FIELDS, _astuple(DEFAULT_LIMITS[kind]), strict=True)) for kind in KINDS}
    for item in (value or "").replace(",", " ").split():
        key, equals, setting = item.partition("=")
        kind, dot, name = key.partition(".")
        if not equals or not dot or kind not in KINDS or name not in _LIMIT_FIELDS or not setting:
            raise ValueError(
                f"{item!r}: expected <role>.<limit>=<value>, <role> one of {', '.join(KINDS)} and"
                f" <limit> one of {', '.join(_LIMIT_FIELDS)}"
            )
        if name == "connection_limit":
            if not setting.lstrip("-").isdigit() or int(setting) < -1:
                raise ValueError(f"{item!r}: a connection limit is a whole number, -1 for none")
            limits[kind][name] = int(setting)
        elif not all(c.isalnum() or c in "-." for c in setting):
            raise ValueError(f"{item!r}: a value such as 60s, 5min, 1GB, 0 or -1")
        else:
            limits[kind][name] = setting
    return {kind: Limits(**fields) for kind, fields in limits.items()}


def _astuple(limits: Limits) -> tuple[Any, ...]:
    return tuple(getattr(limits, name) for name in _LIMIT_FIELDS)
