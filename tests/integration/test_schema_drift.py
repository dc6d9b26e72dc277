"""The migrated schema and the table definitions in service/db/tables/ agree."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, pool

from service.db.schema_revision import head_revision
from service.db.tables import metadata


def _engine(database_url: str) -> Any:
    return create_engine(
        database_url.replace("postgresql://", "postgresql+psycopg://", 1), poolclass=pool.NullPool
    )


def test_migrations_produce_exactly_the_table_definitions(database_url: str) -> None:
    engine = _engine(database_url)
    try:
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_every_check_constraint_in_the_definitions_exists_in_the_database(db: Any) -> None:
    declared = {
        f"{table.name}.{constraint.name}"
        for table in metadata.tables.values()
        for constraint in table.constraints
        if constraint.__class__.__name__ == "CheckConstraint"
    }
    rows = db.execute(
        "SELECT conrelid::regclass::text || '.' || conname AS name FROM pg_constraint WHERE contype = 'c'"
        " AND connamespace = 'public'::regnamespace"
    ).fetchall()
    assert declared == {row["name"] for row in rows}


def test_database_is_at_the_migration_head(db: Any) -> None:
    assert db.execute("SELECT version_num FROM alembic_version").fetchone()["version_num"] == head_revision()


def test_one_running_operation_per_tool_is_a_unique_index_that_names_no_tool(db: Any) -> None:
    indexes = {
        row["indexname"]: row["indexdef"]
        for row in db.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'operations'"
        ).fetchall()
    }
    definition = indexes["uq_operations_one_running_per_tool"]
    assert "UNIQUE" in definition and "(conversation_id, tool)" in definition
    assert "focusing" in definition and "one_running" in definition
    assert not [
        name for name, text in indexes.items() if " WHERE " in text and "." in text.split(" WHERE ")[1]
    ]
