"""An app's MCP App is built from its own page (its ``surface/``), whatever the app: the Pomodoro's
``ui://pomodoro/timer`` from the Web Host's Pomodoro surface, a test-only app's from its folder; a
page that does not load the SDK, or loads a file that is not its own, is refused rather than served
as a View without its script or style."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from service.manifests import Registry
from service.mcp import app_resource, app_tools

POMODORO = Path(__file__).resolve().parents[2] / "service" / "apps" / "pomodoro" / "surface"


def test_the_document_inlines_the_surfaces_files_in_their_order_and_is_built_once(registry: Registry) -> None:
    pomodoro = registry.apps["pomodoro"]
    html = app_resource.document(pomodoro)
    sdk = app_resource.MCP_APPS_SDK.read_text(encoding="utf-8").replace(app_resource.APP_SCOPE, "pomodoro")
    css, script, app = (
        html.index(app_resource.surface_file(POMODORO, "pomodoro.css")),
        html.index(sdk),
        html.index(app_resource.surface_file(POMODORO, "pomodoro.js")),
    )
    assert (
        css < html.index("</head>") < html.index('data-testid="timer"') < script < app < html.index("</body>")
    )
    assert app_resource.document(pomodoro) is html
    assert '"pomodoro_app_read"' in html  # the View's tools, named after its app, as listed


def test_the_mcp_face_serves_what_the_apps_declare(registry: Registry) -> None:
    assert app_resource.tool_views(registry) == {"pomodoro.start": "ui://pomodoro/timer"}
    (resource,) = app_resource.list_resources(registry).resources
    assert (resource.uri, resource.name, resource.title) == (
        "ui://pomodoro/timer",
        "pomodoro-timer",
        "Pomodoro timer",
    )
    assert sorted(app_tools.view_tools(registry)) == [
        "pomodoro.app.close",
        "pomodoro.app.read",
        "pomodoro.app.save_snapshot",
        "pomodoro.app.snapshot",
    ]


def _page_without(tmp_path: Path, tag: str) -> Path:
    surface = Path(shutil.copytree(POMODORO, tmp_path / "surface"))
    page = surface / "index.html"
    page.write_text("\n".join(line for line in page.read_text().splitlines() if tag not in line) + "\n")
    return surface


def test_a_page_without_the_sdk_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"does not load /sdk/lineup-sdk\.js once"):
        app_resource.build("sketch", _page_without(tmp_path, "lineup-sdk.js"))


def test_a_page_that_loads_a_file_not_its_own_is_refused(tmp_path: Path) -> None:
    surface = _page_without(tmp_path, "nothing")
    (surface / "pomodoro.js").unlink()
    with pytest.raises(ValueError, match="which is not a file of its surface/"):
        app_resource.build("sketch", surface)


def test_a_page_without_a_stylesheet_is_one_without_style(tmp_path: Path) -> None:
    html = app_resource.build("sketch", _page_without(tmp_path, "pomodoro.css"))
    assert "<style>" not in html and '"sketch_app_read"' in html


def test_a_script_that_would_end_its_inline_element_is_refused() -> None:
    with pytest.raises(ValueError, match="</script"):
        app_resource._script("const s = '</script>';")
