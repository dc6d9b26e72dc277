"""The revisions serve and the relay read from migrations/versions without Alembic are Alembic's."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from service.db import schema_revision
from service.db.migrate import alembic_config


def test_the_head_and_every_revision_are_alembics() -> None:
    script = ScriptDirectory.from_config(alembic_config("postgresql://unused"))
    assert schema_revision.head_revision() == script.get_current_head()
    assert schema_revision.revisions() == {
        revision.revision: tuple(revision._all_down_revisions) for revision in script.walk_revisions()
    }


def test_two_heads_are_refused_naming_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.py").write_text('revision: str = "a"\ndown_revision: str | None = None\n')
    (tmp_path / "b.py").write_text('revision = "b"\ndown_revision = "a"\n')
    (tmp_path / "c.py").write_text('"""c"""\nrevision: str = "c"\ndown_revision = ("a",)\n')
    monkeypatch.setattr(schema_revision, "VERSIONS", tmp_path)
    schema_revision.revisions.cache_clear()
    schema_revision.head_revision.cache_clear()
    try:
        assert schema_revision.revisions() == {"a": (), "b": ("a",), "c": ("a",)}
        with pytest.raises(RuntimeError, match=r"2 heads, not one: \['b', 'c'\]"):
            schema_revision.head_revision()
    finally:
        schema_revision.revisions.cache_clear()
        schema_revision.head_revision.cache_clear()
