"""``ui://pomodoro/timer`` is built from the Web Host's Pomodoro surface, and refuses to build from a
page it no longer recognises rather than serve a View without its script or style."""

from __future__ import annotations

import pytest

from service.mcp import app_resource


def test_the_document_inlines_the_surfaces_files_in_their_order_and_is_built_once() -> None:
    html = app_resource.pomodoro_document()
    css, sdk, app = (
        html.index(app_resource.surface_file("pomodoro.css")),
        html.index(app_resource.MCP_APPS_SDK.read_text(encoding="utf-8")),
        html.index(app_resource.surface_file("pomodoro.js")),
    )
    assert css < html.index("</head>") < html.index('data-testid="timer"') < sdk < app < html.index("</body>")
    assert app_resource.pomodoro_document() is html


@pytest.mark.parametrize("tag", ["pomodoro.css", "lineup-sdk.js", "pomodoro.js"])
def test_a_page_without_one_of_its_three_tags_is_refused(monkeypatch: pytest.MonkeyPatch, tag: str) -> None:
    original = app_resource.surface_file

    def page_without(name: str) -> str:
        text = original(name)
        if name != "index.html":
            return text
        return "\n".join(line for line in text.splitlines() if tag not in line) + "\n"

    monkeypatch.setattr(app_resource, "surface_file", page_without)
    app_resource.pomodoro_document.cache_clear()
    try:
        with pytest.raises(ValueError, match="no longer has"):
            app_resource.pomodoro_document()
    finally:
        app_resource.pomodoro_document.cache_clear()


def test_a_script_that_would_end_its_inline_element_is_refused() -> None:
    with pytest.raises(ValueError, match="</script"):
        app_resource._script("const s = '</script>';")
