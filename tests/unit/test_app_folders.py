"""A MiniApp is one folder, and its registration and its SQL are checked against each other when
the registry loads (so ``serve`` refuses to start, and this test fails, before any call)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from service import apps
from service.domain.outcomes import SHARED_OUTCOMES
from service.manifests import ManifestError, registry_of
from service.settings import Settings
from tests.conftest import registry_with
from tests.support.echo_app import FOLDER as ECHO

KETTLE = Path(__file__).resolve().parents[1] / "fixtures" / "kettle_app"


@pytest.fixture
def echo(tmp_path: Path) -> Path:
    """A copy of the echo app's folder, to break."""
    return Path(shutil.copytree(ECHO, tmp_path / "echo"))


@pytest.fixture
def kettle(tmp_path: Path) -> Path:
    """A copy of the kettle app's folder (a workspace app with a page), to break."""
    return Path(shutil.copytree(KETTLE, tmp_path / "kettle"))


def _problem(folder: Path) -> str:
    with pytest.raises(ManifestError) as caught:
        registry_with(folder)
    assert caught.value.file == str(folder)
    return caught.value.reason


def _surface_problem(folder: Path) -> str:
    with pytest.raises(ManifestError) as caught:
        registry_with(folder)
    assert (caught.value.file, caught.value.path) == (str(folder / "manifest.json"), "$.surface")
    return caught.value.reason


def test_the_shipped_apps_are_the_folders_and_agree_with_their_sql() -> None:
    folders = apps.folders(apps.APPS_DIR)
    assert {"interact", "pomodoro", "whiteboard"} <= {folder.name for folder in folders}
    assert folders == sorted(path.parent for path in apps.APPS_DIR.glob("*/manifest.json"))
    for folder in folders:
        assert apps.problems(folder, apps.registrations(folder), SHARED_OUTCOMES) == []
    registry = registry_of(Settings())
    assert registry.folders == tuple(folders)  # the default settings run the shipped apps
    assert sorted(registry.runners) == sorted(registry.tools)


def test_the_registry_is_manifests_dirs_folders_then_app_folders(echo: Path, kettle: Path) -> None:
    settings = Settings(app_folders=f"{echo},{kettle}")
    assert settings.apps == (*apps.folders(apps.APPS_DIR), echo, kettle)
    registry = registry_of(settings)
    assert registry.folders == settings.apps
    assert {"echo", "kettle"} <= set(registry.apps)


def test_an_app_folder_that_is_no_app_is_refused_by_the_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not an app folder"):
        Settings(app_folders=str(tmp_path))


def test_an_app_folder_elsewhere_brings_its_tool_and_registration(echo: Path) -> None:
    registry = registry_with(echo)
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


def test_an_outcome_the_registration_knows_that_the_sql_never_answers_is_refused(echo: Path) -> None:
    registration = echo / "registration.py"
    registration.write_text(
        registration.read_text().replace(
            '"word_forbidden": Conflict}', '"word_forbidden": Conflict, "shouted": Answered}'
        )
    )
    assert "echo.say: its registration knows 'shouted', which echo_say() never answers" in _problem(echo)


def test_an_answer_without_a_documented_type_is_refused(echo: Path) -> None:
    registration = echo / "registration.py"
    registration.write_text(registration.read_text().replace('answers={"said": EchoSaid},', ""))
    assert "echo.say: its 'said' answer has no type with a schema" in _problem(echo)


def test_an_answer_whose_type_has_no_schema_is_refused(echo: Path) -> None:
    registration = echo / "registration.py"
    registration.write_text(
        registration.read_text().replace('answers={"said": EchoSaid}', 'answers={"said": dict}')
    )
    assert "echo.say: its 'said' answer has no type with a schema" in _problem(echo)


def test_answers_keyed_by_a_word_the_registration_does_not_know_are_refused(echo: Path) -> None:
    registration = echo / "registration.py"
    registration.write_text(
        registration.read_text().replace(
            'answers={"said": EchoSaid}', 'answers={"said": EchoSaid, "shouted": EchoSaid}'
        )
    )
    assert (
        "echo.say: its answers= names 'shouted', which is none of its outcome words (said, word_forbidden)"
        in _problem(echo)
    )


def test_answers_keyed_by_an_http_status_are_refused(echo: Path) -> None:
    """The shape before outcome words: the status of a word is the faces' to name (service.http)."""
    registration = echo / "registration.py"
    registration.write_text(
        registration.read_text().replace('answers={"said": EchoSaid}', "answers={200: EchoSaid}")
    )
    reason = _problem(echo)
    assert "echo.say: its answers= names 200, which is none of its outcome words" in reason
    assert "echo.say: its 'said' answer has no type with a schema" in reason


def test_an_answer_type_for_a_refusal_is_refused(echo: Path) -> None:
    registration = echo / "registration.py"
    registration.write_text(
        registration.read_text().replace(
            'answers={"said": EchoSaid}', 'answers={"said": EchoSaid, "word_forbidden": EchoSaid}'
        )
    )
    assert "echo.say: its answers= names 'word_forbidden', a refusal (Conflict)" in _problem(echo)


def test_a_registration_of_a_tool_the_manifest_does_not_declare_is_refused(echo: Path) -> None:
    registration = echo / "registration.py"
    registration.write_text(registration.read_text().replace('name="echo.say"', 'name="echo.yell"'))
    with pytest.raises(ManifestError) as caught:
        registry_with(echo)
    assert "echo.yell is registered but not declared here" in caught.value.reason


def test_a_workspace_apps_page_is_its_folders_surface(kettle: Path) -> None:
    registry = registry_with(kettle)
    assert registry.apps["kettle"].surface == kettle / "surface"
    assert registry.apps["pomodoro"].surface == apps.APPS_DIR / "pomodoro" / "surface"
    assert registry.apps["interact"].surface is None  # builtin: the host draws it


def test_a_workspace_app_without_its_page_is_refused(kettle: Path) -> None:
    (kettle / "surface" / "index.html").unlink()
    assert "a workspace app's page surface/index.html is missing from kettle/" in _surface_problem(kettle)


def test_a_workspace_app_whose_entry_is_not_its_own_address_is_refused(kettle: Path) -> None:
    manifest = kettle / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"/apps/kettle/"', '"/apps/pomodoro/"'))
    assert "a workspace app's entry is '/apps/kettle/', not '/apps/pomodoro/'" in _surface_problem(kettle)


def test_a_builtin_app_with_a_page_of_its_own_is_refused(echo: Path) -> None:
    (echo / "surface").mkdir()
    (echo / "surface" / "index.html").write_text("<!doctype html>")
    with pytest.raises(ManifestError) as caught:
        registry_with(echo)
    assert caught.value.path == "$.surface"
    assert "a builtin app has no page of its own" in caught.value.reason


def _declare_view(kettle: Path, **view: str) -> None:
    manifest = kettle / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["surface"]["mcp_app"] = {
        "uri": "ui://kettle/view",
        "name": "kettle-view",
        "title": "Kettle",
        "description": "The kettle.",
        "tool": doc["tools"][0]["name"],
        **view,
    }
    manifest.write_text(json.dumps(doc))


def test_a_workspace_app_may_declare_its_page_an_mcp_app(kettle: Path) -> None:
    _declare_view(kettle)
    view = registry_with(kettle).apps["kettle"].mcp_app
    assert view is not None and (view.uri, view.operation) == ("ui://kettle/view", "operation")


@pytest.mark.parametrize(
    ("view", "reason"),
    [
        ({"uri": "ui://pomodoro/view"}, "an app's MCP App is under ui://kettle/"),
        ({"tool": "pomodoro.start"}, "'pomodoro.start' is not a Tool of this app"),
    ],
)
def test_an_mcp_app_of_another_apps_address_or_tool_is_refused(
    kettle: Path, view: dict[str, str], reason: str
) -> None:
    _declare_view(kettle, **view)
    with pytest.raises(ManifestError) as caught:
        registry_with(kettle)
    assert reason in caught.value.reason
