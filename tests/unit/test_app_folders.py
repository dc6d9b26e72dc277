"""A MiniApp is one folder, and its registration and its SQL are checked against each other when
the registry loads (so ``serve`` refuses to start, and this test fails, before any call)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from service import apps
from service.domain.outcomes import SHARED_OUTCOMES
from service.manifests import ManifestError, load_registry
from tests.support.echo_app import FOLDER as ECHO


@pytest.fixture
def echo(tmp_path: Path) -> Path:
    """A copy of the echo app's folder, to break."""
    return Path(shutil.copytree(ECHO, tmp_path / "echo"))


def _problem(folder: Path) -> str:
    with pytest.raises(ManifestError) as caught:
        load_registry(also=[folder])
    assert caught.value.file == str(folder)
    return caught.value.reason


def test_the_shipped_apps_are_the_folders_and_agree_with_their_sql() -> None:
    folders = apps.folders()
    assert {"interact", "pomodoro", "whiteboard"} <= {folder.name for folder in folders}
    assert folders == sorted(path.parent for path in apps.APPS_DIR.glob("*/manifest.json"))
    for folder in apps.folders():
        assert apps.problems(folder, apps.registrations(folder), SHARED_OUTCOMES) == []
    registry = load_registry()
    assert sorted(registry.runners) == sorted(registry.tools)


def test_an_app_folder_elsewhere_brings_its_tool_and_registration(echo: Path) -> None:
    registry = load_registry(also=[echo])
    assert registry.runner("echo.say").decide == "echo_say"
    assert registry.unregistered() == []


def test_a_decision_missing_from_the_apps_sql_is_refused(echo: Path) -> None:
    registration = echo / "registration.py"
    registration.write_text(registration.read_text().replace('decide="echo_say"', 'decide="echo_shout"'))
    assert "echo.say: its decision echo_shout() is not defined in echo/*.sql" in _problem(echo)


def test_an_outcome_the_sql_can_answer_that_the_registration_does_not_know_is_refused(echo: Path) -> None:
    sql = echo / "decisions.sql"
    sql.write_text(sql.read_text().replace("outcome := 'said';", "outcome := 'shouted';"))
    assert "echo_say() can answer 'shouted', which its registration does not know" in _problem(echo)


def test_an_outcome_the_sql_computes_is_refused_as_uncheckable(echo: Path) -> None:
    sql = echo / "decisions.sql"
    sql.write_text(sql.read_text().replace("outcome := 'said';", "outcome := p_arguments ->> 'word';"))
    assert "an outcome is a literal word, so that it can be checked" in _problem(echo)


def test_an_answer_without_a_documented_type_is_refused(echo: Path) -> None:
    registration = echo / "registration.py"
    registration.write_text(registration.read_text().replace("answers={200: EchoSaid},", ""))
    assert "echo.say: its 'said' answer has no type with a schema" in _problem(echo)


def test_a_registration_of_a_tool_the_manifest_does_not_declare_is_refused(echo: Path) -> None:
    registration = echo / "registration.py"
    registration.write_text(registration.read_text().replace('name="echo.say"', 'name="echo.yell"'))
    with pytest.raises(ManifestError) as caught:
        load_registry(also=[echo])
    assert "echo.yell is registered but not declared here" in caught.value.reason
