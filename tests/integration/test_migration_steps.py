"""The steps migrations 0018 onwards share (``service.db.migration_steps``): a lock held by a request
is waited for, a lock never given fails with ``LockNotAvailable`` after the tries, and the code made
ahead of ``migrate`` is recorded so that ``migrate`` leaves it as it is."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from service.db import code, migration_steps
from service.manifests import registry_of
from service.settings import Settings


def test_a_lock_held_for_a_moment_is_waited_for_and_lock_timeout_is_reset(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as holder, psycopg.connect(database_url) as conn:
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE operations IN ROW EXCLUSIVE MODE")  # what a tool call holds
        release = threading.Timer(0.6, lambda: holder.execute("COMMIT"))
        release.start()
        started = time.monotonic()
        with conn.transaction():
            migration_steps.lock_tables(conn, ("workspaces", "operations"))
            waited = time.monotonic() - started
            locked = conn.execute(
                "SELECT relation::regclass::text FROM pg_locks WHERE pid = pg_backend_pid()"
                " AND mode = 'AccessExclusiveLock' AND locktype = 'relation' ORDER BY 1"
            ).fetchall()
            timeout = conn.execute("SHOW lock_timeout").fetchone()
        release.join()
    assert waited >= 0.5
    assert locked == [("operations",), ("workspaces",)]
    assert timeout == ("0",)


def test_a_lock_never_given_fails_after_the_tries_holding_nothing(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(migration_steps, "LOCK_ATTEMPTS", 3)
    with psycopg.connect(database_url, autocommit=True) as holder, psycopg.connect(database_url) as conn:
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE operations IN ROW EXCLUSIVE MODE")
        with conn.transaction():
            with pytest.raises(psycopg.errors.LockNotAvailable):
                migration_steps.lock_tables(conn, ("workspaces", "operations"))
            # Each try gave back what it took: workspaces is not held when the error goes up.
            held = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()"
                " AND mode = 'AccessExclusiveLock' AND locktype = 'relation'"
            ).fetchone()
        holder.execute("COMMIT")
    assert held == (0,)


def test_code_made_ahead_is_recorded_as_migrate_records_it(database_url: str, db: Any) -> None:
    key = ("trigger", "workspaces.workspaces_guard")
    definition = {d.key: d for d in code.definitions(code.SOURCE, ())}[key]
    db.execute("DELETE FROM database_code WHERE kind = %s AND name = %s", key)
    db.execute("DROP TRIGGER workspaces_guard ON workspaces")
    with psycopg.connect(database_url) as conn:
        with conn.transaction():
            migration_steps.make_code(conn, (key,))
        assert (
            code.apply(conn, registry_of(Settings()).folders) == []
        )  # in place, recorded: migrate changes nothing
        conn.rollback()
    row = db.execute("SELECT checksum FROM database_code WHERE kind = %s AND name = %s", key).fetchone()
    assert row["checksum"] == definition.checksum
