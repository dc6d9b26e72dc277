"""One registry: ``migrate`` and ``serve`` pointed at a set of app folders (APP_FOLDERS, besides the
default set) run exactly those apps, and every face publishes exactly what the service runs — the
Agent Tool API's list, the OpenAPI document and MCP's ``tools/list`` name the same Tools, those of
the registry the settings name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.database import DatabaseFactory
from harness.mcp import ModernWire
from tests.conftest import AGENT, AGENT_TOKEN, ServiceProcess, registry_with, service_on_own_database
from tests.support.echo_app import FOLDER as ECHO

LOOKALIKE = Path(__file__).resolve().parents[1] / "fixtures" / "lookalike_app"
FOLDERS = (ECHO, LOOKALIKE)


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """Migrated, then served, with the same APP_FOLDERS."""
    folders = ",".join(str(folder) for folder in FOLDERS)
    with service_on_own_database(
        database_factory, tmp_path_factory.mktemp("apps"), APP_FOLDERS=folders
    ) as process:
        yield process


def _model_tools(listed: list[dict[str, Any]]) -> list[str]:
    """The apps' Tools of ``tools/list`` a model sees (not a View's own, ``visibility: ["app"]``,
    nor the engine's own ``operation_status``), by the manifest's name each carries in ``_meta``
    (the listed name is its provider-safe form)."""
    return sorted(
        tool["_meta"]["io.lineup/tool"]
        for tool in listed
        if tool.get("_meta", {}).get("ui", {}).get("visibility") != ["app"]
        and tool["name"] != "operation_status"
    )


async def test_every_face_publishes_exactly_the_tools_it_runs(service: ServiceProcess) -> None:
    expected = sorted(registry_with(*FOLDERS).tools)
    assert {"echo.say", "lookalike.start", "pomodoro.start", "interact.ask"} <= set(expected)
    async with httpx.AsyncClient(base_url=service.base_url, timeout=20) as http:
        listed = (await http.get("/v1/tools", headers=AGENT)).json()["tools"]
        document = (await http.get("/schema/openapi.json")).json()
        wire = ModernWire(http, "/mcp")
        wire.http.headers["Authorization"] = f"Bearer {AGENT_TOKEN}"
        mcp = (await wire.post("tools/list", {})).json()["result"]["tools"]
        # Each runs: migrate applied the apps' decisions the service then calls.
        said = await http.post(
            "/v1/tool-calls",
            headers=AGENT,
            json={
                "tool_call_id": "one-1",
                "conversation_id": "one",
                "tool": "echo.say",
                "arguments": {"word": "a"},
            },
        )
        looked = await http.post(
            "/v1/tool-calls",
            headers=AGENT,
            json={
                "tool_call_id": "one-2",
                "conversation_id": "one",
                "tool": "lookalike.start",
                "arguments": {"duration_seconds": 5},
            },
        )
    operation = document["paths"]["/v1/tool-calls"]["post"]
    mapping = operation["requestBody"]["content"]["application/json"]["schema"]["discriminator"]["mapping"]
    assert sorted(tool["name"] for tool in listed) == expected
    assert sorted(mapping) == expected
    assert sorted(operation["x-answers-by-tool"]) == expected
    assert _model_tools(mcp) == expected
    assert (said.status_code, said.json()["word"]) == (200, "A")
    assert (looked.status_code, looked.json()["status"]) == (202, "accepted")
