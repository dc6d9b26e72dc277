"""Handing a schema made before the roles to the owner (``python -m service roles``) while the
previous release serves: it never queues every query behind a long transaction, never deadlocks
with a request, and a run stopped half-way is finished by running it again."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from service.db import roles
from service.manifests import registry_of
from service.settings import Settings
from tests.integration.test_roles import drop_roles, unique_names

Db = psycopg.Connection[dict[str, Any]]


def owner_of(db: Db, table: str) -> str:
    row = db.execute("SELECT tableowner FROM pg_tables WHERE tablename = %s", (table,)).fetchone()
    assert row is not None
    return str(row["tableowner"])


def test_handing_a_table_to_the_owner_never_queues_behind_a_long_transaction(
    database_url: str, db: Db
) -> None:
    made = unique_names()
    try:
        with psycopg.connect(database_url) as long_one, psycopg.connect(database_url) as admin:
            long_one.execute("SELECT count(*) FROM outbox")  # its transaction stays open, holding a lock
            with pytest.raises(psycopg.errors.LockNotAvailable):
                roles.ensure(admin, made, registry_of(Settings()))
            admin.rollback()
            assert owner_of(db, "outbox") != made.owner
            long_one.rollback()
            # Once the long transaction is gone, running it again finishes the work.
            roles.ensure(admin, made, registry_of(Settings()))
            admin.commit()
        assert owner_of(db, "outbox") == made.owner
    finally:
        drop_roles(database_url, made)


def test_a_request_holding_one_table_and_reading_another_never_deadlocks_with_the_handover(
    database_url: str, db: Db
) -> None:
    # The order the handover takes the tables in; a request that writes a later one, and then
    # (while the handover waits for that one) reads an earlier one, must get it at once.
    with psycopg.connect(database_url) as probe:
        order = [
            identity
            for kind, identity in probe.execute(roles._NOT_OWNED, {"owner": "pg_database_owner"})
            if kind == "TABLE"
        ]
    assert len(order) > 2
    later, earlier = order[-1], order[0]
    made = unique_names()
    failures: list[BaseException] = []

    def handover() -> None:
        try:
            with psycopg.connect(database_url) as admin:
                roles.ensure(admin, made, registry_of(Settings()))
        except BaseException as error:  # reported by the test below
            failures.append(error)

    try:
        with psycopg.connect(database_url) as request:
            request.execute(f"LOCK TABLE {later} IN ROW EXCLUSIVE MODE")
            worker = threading.Thread(target=handover)
            worker.start()
            waiting = "SELECT count(*) AS n FROM pg_locks WHERE NOT granted AND relation = %s::regclass"
            for _ in range(200):
                if db.execute(waiting, (later,)).fetchone()["n"]:  # type: ignore[index]
                    break
                threading.Event().wait(0.02)
            else:
                pytest.fail(f"the handover never waited for {later}")
            request.execute("SET LOCAL lock_timeout = '3s'")
            request.execute(f"SELECT 1 FROM {earlier} LIMIT 1")  # a deadlock or a timeout raises here
            request.commit()
            worker.join(30)
        assert failures == []
        assert owner_of(db, later) == owner_of(db, earlier) == made.owner
    finally:
        drop_roles(database_url, made)
