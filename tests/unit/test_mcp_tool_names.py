"""MCP lists every tool under a name every model provider accepts (``service.tool_names``):
derived from any app's manifest name, refused at load when it cannot be listed."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from service.manifests import ManifestError, load_registry
from service.mcp import app_tools
from service.mcp.tools import list_tools
from service.tool_names import PROVIDER_SAFE, ToolNameError, listed_name, listed_names
from tests.support.manifests import SHIPPED, minimal, write


def test_every_tool_mcp_lists_has_a_provider_safe_name_and_its_own_as_title() -> None:
    registry = load_registry(SHIPPED)
    listed = [*list_tools(registry).tools, *app_tools.app_tools(registry)]
    names = {tool.name: tool.title for tool in listed}
    assert {"pomodoro_start", "pomodoro_interrupt", "interact_ask", "pomodoro_app_read"} <= set(names)
    assert names["pomodoro_app_save_snapshot"] == "pomodoro.app.save_snapshot"
    for tool in listed:
        assert PROVIDER_SAFE.match(tool.name), tool.name
        assert tool.meta is not None and tool.meta["io.lineup/tool"] == tool.title
        assert tool.title is not None and listed_name(tool.title) == tool.name


def test_the_listed_name_replaces_what_providers_refuse_and_keeps_the_rest() -> None:
    assert listed_name("pomodoro.start") == "pomodoro_start"
    assert listed_name("my-app.do-it") == "my-app_do-it"
    assert listed_name("a.b.c d/é") == "a_b_c_d__"


def test_names_that_would_be_listed_alike_or_too_long_are_refused() -> None:
    assert listed_names(["a.b", "c.d"]) == {"a_b": "a.b", "c_d": "c.d"}
    with pytest.raises(ToolNameError, match=re.escape("'a.b' and 'a_b' would both be listed as 'a_b'")):
        listed_names(["a.b", "a_b"])
    with pytest.raises(ToolNameError, match="must match"):
        listed_names(["timer." + "x" * 59])


def test_a_manifest_tool_whose_listed_name_is_too_long_is_refused_at_load(tmp_path: Path) -> None:
    (tmp_path / "interact").mkdir()
    shutil.copy(SHIPPED / "interact" / "manifest.json", tmp_path / "interact" / "manifest.json")
    write(tmp_path, "timer.json", minimal(name="timer." + "x" * 59))  # 65 characters
    with pytest.raises(ManifestError) as caught:
        load_registry(tmp_path)
    assert caught.value.path == "$.tools[0].name"
    assert "cannot be listed" in caught.value.reason
    write(tmp_path, "timer.json", minimal(name="timer." + "x" * 58))  # 64: listed as it is
    assert listed_name("timer." + "x" * 58) in listed_names(load_registry(tmp_path).tools)
