"""Files an app serves as MCP resources (its manifest's ``resources``): listed after the MCP Apps'
views, read as text for a text type and as base64 otherwise, the same bytes as the file; and every
way a declaration is refused at load, with the file and the place named."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from service.manifests import ManifestError, load_registry
from service.mcp import app_resource
from tests.support.manifests import SHIPPED, minimal, write

PNG = bytes.fromhex("89504e470d0a1a0a")


@pytest.fixture
def apps(tmp_path: Path) -> Path:
    """A directory of app folders: Interact and Pomodoro (which has an MCP App)."""
    for scope in ("interact", "pomodoro"):
        shutil.copytree(SHIPPED / scope, tmp_path / scope, ignore=shutil.ignore_patterns("*.pyc"))
    return tmp_path


def resource(uri: str, file: str, mime_type: str = "text/plain", **more: Any) -> dict[str, Any]:
    return {"uri": uri, "name": file, "description": "A file.", "mime_type": mime_type, "file": file} | more


def with_files(apps: Path, scope: str, files: dict[str, bytes], declared: list[dict[str, Any]]) -> None:
    write(apps, f"{scope}.json", minimal(scope) | {"resources": declared})
    (apps / scope / "resources").mkdir()
    for name, data in files.items():
        (apps / scope / "resources" / name).write_bytes(data)


def refusal(apps: Path) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        load_registry(apps)
    return caught.value


def test_an_apps_files_are_listed_after_the_views_and_read_as_text_or_base64(apps: Path) -> None:
    with_files(
        apps,
        "docs",
        {"guide.md": "# Guide — ünïcode\n".encode(), "logo.png": PNG, "data.json": b'{"a": 1}'},
        [
            resource("docs://guide", "guide.md", "text/markdown", title="Guide"),
            resource("docs://logo", "logo.png", "image/png"),
            resource("docs://data", "data.json", "application/json"),
        ],
    )
    registry = load_registry(apps)
    listed = app_resource.list_resources(registry).resources
    assert [(r.uri, r.mime_type, r.size) for r in listed] == [
        ("ui://pomodoro/timer", app_resource.APP_MIME_TYPE, None),
        ("docs://guide", "text/markdown", len("# Guide — ünïcode\n".encode())),
        ("docs://logo", "image/png", len(PNG)),
        ("docs://data", "application/json", 8),
    ]
    assert listed[1].title == "Guide"

    (guide,) = app_resource.read_resource(registry, "docs://guide").contents
    assert isinstance(guide, types.TextResourceContents)
    assert (guide.uri, guide.mime_type, guide.text) == (
        "docs://guide",
        "text/markdown",
        "# Guide — ünïcode\n",
    )
    (logo,) = app_resource.read_resource(registry, "docs://logo").contents
    assert isinstance(logo, types.BlobResourceContents)
    assert base64.b64decode(logo.blob) == PNG
    (data,) = app_resource.read_resource(registry, "docs://data").contents
    assert isinstance(data, types.TextResourceContents) and data.text == '{"a": 1}'
    # The views are still served, and an unknown URI is the protocol's resource-not-found.
    assert (
        app_resource.read_resource(registry, "ui://pomodoro/timer").contents[0].uri == "ui://pomodoro/timer"
    )
    with pytest.raises(MCPError) as unknown:
        app_resource.read_resource(registry, "docs://nothing")
    assert unknown.value.error.code == app_resource.RESOURCE_NOT_FOUND


def test_a_declared_file_that_is_not_in_the_apps_resources_folder_is_refused(apps: Path) -> None:
    with_files(apps, "docs", {}, [resource("docs://guide", "guide.md")])
    error = refusal(apps)
    assert (Path(error.file).parent.name, error.path) == ("docs", "$.resources[0].file")
    assert "not a file" in error.reason


def test_a_file_name_that_leaves_the_folder_is_refused_by_the_schema(apps: Path) -> None:
    with_files(apps, "docs", {}, [resource("docs://guide", "../manifest.json")])
    assert refusal(apps).path == "$.resources[0].file"


def test_a_file_larger_than_a_mebibyte_is_refused(apps: Path) -> None:
    with_files(
        apps,
        "docs",
        {"big.bin": b"\0" * ((1 << 20) + 1)},
        [resource("docs://big", "big.bin", "application/octet-stream")],
    )
    error = refusal(apps)
    assert (error.path, "larger than" in error.reason) == ("$.resources[0].file", True)


def test_a_text_type_file_that_is_not_utf8_is_refused(apps: Path) -> None:
    with_files(apps, "docs", {"latin.txt": "café".encode("latin-1")}, [resource("docs://latin", "latin.txt")])
    error = refusal(apps)
    assert (error.path, "UTF-8" in error.reason) == ("$.resources[0].file", True)


def test_a_ui_uri_is_the_mcp_apps_and_refused_for_a_file(apps: Path) -> None:
    with_files(apps, "docs", {"a.txt": b"a"}, [resource("ui://docs/a", "a.txt")])
    assert refusal(apps).path == "$.resources[0].uri"


def test_a_uri_declared_twice_in_an_app_or_across_apps_is_refused(apps: Path) -> None:
    with_files(apps, "docs", {"a.txt": b"a"}, [resource("x://a", "a.txt"), resource("x://a", "a.txt")])
    assert refusal(apps).path == "$.resources[1].uri"
    shutil.rmtree(apps / "docs")
    with_files(apps, "docs", {"a.txt": b"a"}, [resource("x://a", "a.txt")])
    with_files(apps, "more", {"b.txt": b"b"}, [resource("x://a", "b.txt")])
    error = refusal(apps)
    assert (Path(error.file).parent.name, error.path) == ("more", "$.resources[0].uri")
    assert "also in" in error.reason
