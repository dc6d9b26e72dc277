"""The schema as SQLAlchemy Core tables, one module per part of the domain.

The migrations in ``migrations/`` create it; ``tests/integration/test_schema_drift.py`` proves the
migrated database and these definitions agree. Runtime code uses named SQL statements, not the ORM.
Importing this package defines every table on ``metadata``:

- ``conventions``: the metadata, its naming convention, the domain's words the checks list;
- ``workspaces``: the foreground, app instances, sub-sessions, snapshots, operations;
- ``conversations``: tool-call answers, messages, interactions, surface and projection events;
- ``delivery``: the outbox, its attempts, the endpoint's controls, tallies and retention;
- ``access``: Host sessions, SDK capabilities, console sign-ins;
- ``database_code``: the applied database code and its checksums;
- ``limits``: the write limits' counters per principal.
"""

from __future__ import annotations

from service.db.tables import access, conversations, database_code, delivery, limits, workspaces
from service.db.tables.conventions import (
    ATTEMPT_OUTCOMES,
    CIRCUIT_STATES,
    NOW,
    OPERATION_REASONS,
    OPERATION_STATES,
    OUTBOX_STATUSES,
    metadata,
)

__all__ = [
    "ATTEMPT_OUTCOMES",
    "CIRCUIT_STATES",
    "NOW",
    "OPERATION_REASONS",
    "OPERATION_STATES",
    "OUTBOX_STATUSES",
    "access",
    "conversations",
    "database_code",
    "delivery",
    "limits",
    "metadata",
    "workspaces",
]
