"""The schema has one source: tables in service/db/tables/, database code in service/db/sql/.

A database built from those two equals, object by object, one built by replaying every migration;
an edit of either side alone — a function changed by hand or in a migration, an index or a column
declared without its migration, a .sql file changed without migrate — shows as a difference.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Column, MetaData, Text, create_engine, pool

from harness.database import DatabaseFactory, with_database
from service.db import code
from service.db.tables import metadata
from service.manifests import registry_of
from service.settings import Settings
from tests.support.catalog import catalog, differences

# The default settings' app folders: the database code of the template every test database is made from.
APPS = registry_of(Settings()).folders


def _build_from_source(url: str, source: Path = code.SOURCE, tables: Any = metadata) -> None:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1), poolclass=pool.NullPool)
    try:
        tables.create_all(engine)
    finally:
        engine.dispose()
    with psycopg.connect(url) as conn:
        code.apply(conn, APPS, source)


@pytest.fixture
def empty_url(database_factory: DatabaseFactory) -> Iterator[str]:
    name = database_factory.create_empty()
    try:
        yield with_database(database_factory.server, name)
    finally:
        database_factory.drop(name)


@pytest.fixture
def source_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "sql"
    shutil.copytree(code.SOURCE, copy)
    return copy


def test_a_database_built_from_the_source_equals_the_migrated_one(database_url: str, empty_url: str) -> None:
    _build_from_source(empty_url)
    assert differences(catalog(database_url), catalog(empty_url)) == []


def test_the_catalog_holds_every_kind_of_object(database_url: str) -> None:
    kinds = {name.split(" ", 1)[0] for name in catalog(database_url)}
    assert kinds == {"column", "constraint", "index", "trigger", "function", "view", "type"}
    indexes = catalog(database_url)
    assert "WHERE (state = 'focusing'::text)" in indexes["index ix_operations_focusing_ends_at"]


def _names(lines: list[str]) -> list[str]:
    return [line.split("\n", 1)[0] for line in lines]


def _code_of(name: str) -> str:
    return next(d.sql for d in code.definitions(code.SOURCE, APPS) if d.name == name)


def _edit(source: Path, file: str, old: str, new: str) -> None:
    path = source / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_function_changed_outside_the_source_is_a_difference(database_url: str, db: Any) -> None:
    before = catalog(database_url)
    db.execute(_code_of("claim_due").replace("ORDER BY o.ends_at", "ORDER BY o.ends_at DESC", 1))
    assert _names(differences(before, catalog(database_url))) == ["differs: function claim_due(integer)"]


def test_an_index_predicate_changed_outside_the_tables_is_a_difference(database_url: str, db: Any) -> None:
    before = catalog(database_url)
    db.execute("DROP INDEX ix_operations_focusing_ends_at")
    db.execute(
        "CREATE INDEX ix_operations_focusing_ends_at ON operations (ends_at) WHERE state <> 'completed'"
    )
    assert _names(differences(before, catalog(database_url))) == [
        "differs: index ix_operations_focusing_ends_at"
    ]


def test_a_column_declared_without_its_migration_is_a_difference(database_url: str, empty_url: str) -> None:
    tables = MetaData(naming_convention=metadata.naming_convention)
    for table in metadata.sorted_tables:
        table.to_metadata(tables)
    tables.tables["outbox"].append_column(Column("note", Text))
    _build_from_source(empty_url, tables=tables)
    assert _names(differences(catalog(database_url), catalog(empty_url))) == [
        "only in the second: column outbox.note"
    ]


def test_a_source_file_changed_without_migrate_is_a_difference(
    database_url: str, empty_url: str, source_copy: Path
) -> None:
    _edit(source_copy, "70_settle.sql", "ORDER BY o.ends_at", "ORDER BY o.ends_at DESC")
    _build_from_source(empty_url, source_copy)
    assert _names(differences(catalog(database_url), catalog(empty_url))) == [
        "differs: function claim_due(integer)"
    ]


def test_migrate_replaces_what_changed_and_nothing_else(database_url: str, source_copy: Path) -> None:
    with psycopg.connect(database_url) as conn:
        assert code.apply(conn, APPS) == []
    _edit(source_copy, "70_settle.sql", "ORDER BY o.ends_at", "ORDER BY o.ends_at DESC")
    with psycopg.connect(database_url) as conn:
        assert code.apply(conn, APPS, source_copy) == ["replaced function claim_due"]
        assert code.apply(conn, APPS, source_copy) == []


def test_migrate_drops_what_left_the_source(database_url: str, db: Any) -> None:
    db.execute("CREATE FUNCTION stray() RETURNS integer LANGUAGE sql RETURN 1")
    db.execute("CREATE VIEW stray_view AS SELECT 1 AS one")
    with psycopg.connect(database_url) as conn:
        assert sorted(code.apply(conn, APPS)) == ["dropped function stray", "dropped view stray_view"]
    assert "function stray()" not in catalog(database_url)


def test_migrate_leaves_what_an_extension_owns_in_the_schema_alone(database_url: str, db: Any) -> None:
    # pg_buffercache puts a view and a function into public, as Citus does (citus_tables, …).
    db.execute("CREATE EXTENSION pg_buffercache SCHEMA public")
    with psycopg.connect(database_url) as conn:
        assert code.apply(conn, APPS) == []
    assert db.execute("SELECT to_regclass('public.pg_buffercache') IS NOT NULL AS kept").fetchone()["kept"]


def test_a_function_whose_result_changes_is_replaced_and_its_old_overload_dropped(
    database_url: str, source_copy: Path
) -> None:
    _edit(
        source_copy,
        "40_workspaces.sql",
        "lock_workspace(p_conversation_id text, p_create boolean) RETURNS boolean",
        "lock_workspace(p_conversation_id text, p_create boolean, p_extra integer DEFAULT 0) RETURNS boolean",
    )
    with psycopg.connect(database_url) as conn:
        assert code.apply(conn, APPS, source_copy) == ["replaced function lock_workspace"]
    assert [n for n in catalog(database_url) if n.startswith("function lock_workspace")] == [
        "function lock_workspace(text,boolean,integer)"
    ]


def test_a_type_never_changes_in_place(database_url: str, source_copy: Path) -> None:
    _edit(source_copy, "60_outbox.sql", "    tracestate text\n", "    tracestate text,\n    note text\n")
    with psycopg.connect(database_url) as conn, pytest.raises(RuntimeError, match="never changes in place"):
        code.apply(conn, APPS, source_copy)


def test_every_definition_in_the_source_says_what_it_is_for() -> None:
    undocumented = [
        d.name
        for d in code.definitions(code.SOURCE, APPS)
        if d.kind != "trigger" and not d.sql.lstrip().startswith("--")
    ]
    assert undocumented == []


def test_the_source_splits_into_statements_at_semicolons_outside_dollar_quotes() -> None:
    text = """
-- a comment; with a semicolon
CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    RETURN 1;  -- not the end
END $$;
CREATE TYPE t AS (a int);
"""
    assert [s.splitlines()[-1] for s in code.statements(text)] == ["END $$;", "CREATE TYPE t AS (a int);"]
    with pytest.raises(ValueError, match="closing semicolon"):
        list(code.statements("CREATE TYPE t AS (a int)"))


def test_every_registered_decision_is_in_the_migrated_database_in_the_one_decision_shape(db: Any) -> None:
    shape = (
        "p_tool_call_id text, p_conversation_id text, p_arguments jsonb, p_context jsonb,"
        " OUT outcome text, OUT response jsonb, OUT effects decision_effects"
    )
    for registration in registry_of(Settings()).runners.values():
        row = db.execute(
            "SELECT pg_get_function_arguments(to_regproc(%s)) AS arguments", (registration.decide,)
        ).fetchone()
        assert row["arguments"] == shape, registration.name


# A body that waits, then plans a statement naming a type: compiled when its call starts, planned
# after the wait — as a call of the release still serving that straddles migrate's commit.
PROBE_BEFORE = """
-- probe_row: the shape the release before names
CREATE TYPE probe_row AS (a integer);

-- probe_take: takes the shape the release before names
CREATE OR REPLACE FUNCTION probe_take(p_row probe_row) RETURNS integer LANGUAGE sql AS $$ SELECT p_row.a $$;

-- probe_slow: waits, then names the shape
CREATE OR REPLACE FUNCTION probe_slow(p_seconds double precision) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_sleep(p_seconds);
    RETURN probe_take(ROW(1)::probe_row);
END $$;
"""
PROBE_AFTER = """
-- probe_row_v2: the new shape
CREATE TYPE probe_row_v2 AS (a integer, b integer);

-- probe_take: takes the new shape (the old overload is left behind)
CREATE OR REPLACE FUNCTION probe_take(p_row probe_row_v2) RETURNS integer LANGUAGE sql AS $$ SELECT p_row.a $$;

-- probe_slow: waits, then names the new shape
CREATE OR REPLACE FUNCTION probe_slow(p_seconds double precision) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_sleep(p_seconds);
    RETURN probe_take(ROW(1, 2)::probe_row_v2);
END $$;
"""


def _sources(tmp_path: Path) -> tuple[Path, Path]:
    before, after = tmp_path / "before", tmp_path / "after"
    for folder, probe in ((before, PROBE_BEFORE), (after, PROBE_AFTER)):
        shutil.copytree(code.SOURCE, folder)
        (folder / "98_probe.sql").write_text(probe)
    return before, after


def _call_in_flight(database_url: str, seconds: float) -> tuple[threading.Thread, dict[str, Any]]:
    """``probe_slow(seconds)`` on a session of its own, inside its ``pg_sleep`` (its body compiled)
    when this returns."""
    outcome: dict[str, Any] = {}
    connected = threading.Event()

    def call() -> None:
        with psycopg.connect(database_url, autocommit=True) as conn:
            outcome["pid"] = conn.info.backend_pid
            connected.set()
            try:
                outcome["value"] = conn.execute("SELECT probe_slow(%s)", (seconds,)).fetchone()
            except psycopg.Error as exc:
                outcome["error"] = exc

    thread = threading.Thread(target=call)
    thread.start()
    assert connected.wait(10)
    with psycopg.connect(database_url, autocommit=True) as watcher:
        for _ in range(200):
            row = watcher.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (outcome["pid"],))
            if row.fetchone() == ("PgSleep",):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the call never reached its pg_sleep")
    return thread, outcome


def test_migrate_keeps_what_left_the_source_until_the_calls_begun_before_it_end(
    database_url: str, tmp_path: Path
) -> None:
    before, after = _sources(tmp_path)
    with psycopg.connect(database_url) as conn:
        code.apply(conn, APPS, before)
    thread, outcome = _call_in_flight(database_url, 1.5)
    with psycopg.connect(database_url) as conn:
        changes = code.apply(conn, APPS, after, drop=False)
    assert "created type probe_row_v2" in changes and "replaced function probe_slow" in changes
    assert not any(change.startswith("dropped") for change in changes)
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert code.wait_for_older_transactions(conn, 10) == []
        assert "value" in outcome or "error" in outcome  # the call ended before the wait did
        with conn.transaction():
            dropped = code.drop_unwanted(conn, APPS, after)
        with conn.transaction():
            assert code.drop_unwanted(conn, APPS, after) == []
    thread.join(10)
    assert outcome["value"] == (1,), outcome  # its old body ran against the shape it names
    assert dropped == [
        "dropped function probe_take(probe_row), an overload its new arguments left",
        "dropped type probe_row",
    ]
    assert [n for n in catalog(database_url) if n.startswith(("function probe", "type probe"))] == [
        "function probe_slow(double precision)",
        "function probe_take(probe_row_v2)",
        "type probe_row_v2",
    ]


def test_code_dropped_in_the_same_transaction_fails_a_call_begun_before_it(
    database_url: str, tmp_path: Path
) -> None:
    # Why migrate drops apart: with the drops in the same transaction, the call above fails.
    before, after = _sources(tmp_path)
    with psycopg.connect(database_url) as conn:
        code.apply(conn, APPS, before)
    thread, outcome = _call_in_flight(database_url, 1.0)
    with psycopg.connect(database_url) as conn:
        code.apply(conn, APPS, after)
    thread.join(10)
    assert "probe_row" in str(outcome.get("error")) and "does not exist" in str(outcome.get("error"))


def test_the_wait_for_older_transactions_ends_and_names_those_still_open(database_url: str) -> None:
    with (
        psycopg.connect(database_url, autocommit=True) as waiting,
        psycopg.connect(database_url, autocommit=True) as open_one,
    ):
        pid = open_one.info.backend_pid
        open_one.execute("BEGIN")
        open_one.execute("SELECT 1")
        assert code.wait_for_older_transactions(waiting, 0.2) == [pid]
        open_one.execute("COMMIT")
        assert code.wait_for_older_transactions(waiting, 0.2) == []
