"""The shipped manifests, and each Tool's arguments checked against its input schema, at the path
of each problem."""

from __future__ import annotations

from typing import Any

import pytest

from service.json_errors import ErrorDetail
from service.manifests import Registry, load_registry
from tests.support.manifests import SHIPPED, paths


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_registry(SHIPPED)


# --- the shipped manifests --------------------------------------------------------------------


def test_shipped_manifests_load_with_their_surfaces_and_features(registry: Registry) -> None:
    # At least these: another app is another folder, and no list here to edit.
    assert {"interact", "pomodoro", "whiteboard"} <= set(registry.apps)
    pomodoro = registry.app("pomodoro")
    assert pomodoro is not None
    assert (pomodoro.surface_kind, pomodoro.entry) == ("workspace", "/apps/pomodoro/")
    assert pomodoro.file.endswith("pomodoro/manifest.json")
    state = pomodoro.instance_state
    assert state is not None
    assert (state.state_schema_version, state.max_bytes, state.retention) == (1, 4096, "retain_readonly")
    whiteboard = registry.app("whiteboard")
    assert whiteboard is not None
    assert whiteboard.tools == ()
    assert whiteboard.instance_state is not None
    assert (whiteboard.instance_state.max_bytes, whiteboard.instance_state.retention) == (
        65536,
        "delete_on_close",
    )
    interact = registry.app("interact")
    assert interact is not None
    assert (interact.surface_kind, interact.entry, interact.instance_state) == ("builtin", None, None)
    assert registry.app("nope") is None
    assert registry.tool("nope.go") is None


def test_pomodoro_state_schema_is_exactly_the_contract_one(registry: Registry) -> None:
    pomodoro = registry.app("pomodoro")
    assert pomodoro is not None
    assert pomodoro.instance_state is not None
    assert pomodoro.instance_state.state_schema == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "activity": {"type": ["string", "null"], "maxLength": 200},
            "operation_id": {"type": "string", "format": "uuid"},
            "started_at": {"type": "string", "format": "date-time"},
            "ends_at": {"type": "string", "format": "date-time"},
            "display_state": {"enum": ["focusing", "completed", "interrupted", "cancelled"]},
        },
    }


def test_public_tools_are_sorted_by_name_with_the_tool_api_fields(registry: Registry) -> None:
    tools = registry.public_tools()
    names = [t["name"] for t in tools]
    assert names == sorted(registry.tools)
    assert all(set(t) == {"name", "app_scope", "kind", "description", "input_schema"} for t in tools)
    kinds = {t["name"]: (t["app_scope"], t["kind"]) for t in tools}
    shipped = {
        "interact.ask": ("interact", "operation"),
        "pomodoro.interrupt": ("pomodoro", "direct"),
        "pomodoro.start": ("pomodoro", "operation"),
    }
    assert kinds.items() >= shipped.items()


def test_public_tools_hand_out_copies_of_the_input_schema(registry: Registry) -> None:
    registry.public_tools()[0]["input_schema"]["properties"]["prompt"]["maxLength"] = 1
    tool = registry.tool("interact.ask")
    assert tool is not None
    assert tool.validate_arguments({"prompt": "long enough"}) == []


def test_interrupt_description_tells_the_agent_it_takes_no_target(registry: Registry) -> None:
    tool = registry.tool("pomodoro.interrupt")
    assert tool is not None
    assert "{}" in tool.description
    assert "operation_id" in tool.description
    assert "instance_id" in tool.description


# --- pomodoro.start ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {"duration_seconds": 1500},
        {"duration_seconds": 1},
        {"duration_seconds": 14400, "activity": "write report"},
        {"duration_seconds": 60, "activity": "x" * 200},
    ],
)
def test_pomodoro_start_accepts_good_arguments(registry: Registry, arguments: dict[str, Any]) -> None:
    tool = registry.tool("pomodoro.start")
    assert tool is not None
    assert tool.validate_arguments(arguments) == []


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"duration_seconds": 0}, ["arguments.duration_seconds"]),
        ({"duration_seconds": 14401}, ["arguments.duration_seconds"]),
        ({"duration_seconds": "25"}, ["arguments.duration_seconds"]),
        ({"duration_seconds": 25.5}, ["arguments.duration_seconds"]),
        ({"duration_seconds": True}, ["arguments.duration_seconds"]),
        ({"duration_seconds": 1500, "instance_id": "x"}, ["arguments.instance_id"]),
        ({"duration_seconds": 1500, "activity": "x" * 201}, ["arguments.activity"]),
        ({"duration_seconds": 1500, "activity": None}, ["arguments.activity"]),
        ({}, ["arguments.duration_seconds"]),
        ({"duration_seconds": 1500, "b": 1, "a": 2}, ["arguments.a", "arguments.b"]),
    ],
)
def test_pomodoro_start_rejects_bad_arguments_at_their_path(
    registry: Registry, arguments: dict[str, Any], expected: list[str]
) -> None:
    tool = registry.tool("pomodoro.start")
    assert tool is not None
    assert paths(tool.validate_arguments(arguments)) == expected


def test_pomodoro_start_messages_name_the_problem(registry: Registry) -> None:
    tool = registry.tool("pomodoro.start")
    assert tool is not None
    assert tool.validate_arguments({"mood": "ok"}) == [
        ErrorDetail("arguments.duration_seconds", "is required"),
        ErrorDetail("arguments.mood", "unexpected property"),
    ]
    [detail] = tool.validate_arguments({"duration_seconds": 0})
    assert detail.as_dict() == {
        "path": "arguments.duration_seconds",
        "message": "0 is less than the minimum of 1",
    }


def test_a_long_rejected_value_is_not_echoed_whole(registry: Registry) -> None:
    tool = registry.tool("pomodoro.start")
    assert tool is not None
    [detail] = tool.validate_arguments({"duration_seconds": 1, "activity": "x" * 5000})
    assert detail.message.endswith("... is too long")
    assert len(detail.message) < 200


@pytest.mark.parametrize("arguments", [[1500], "1500", 1500, None])
def test_non_object_arguments_give_one_detail_at_the_prefix(registry: Registry, arguments: object) -> None:
    tool = registry.tool("pomodoro.start")
    assert tool is not None
    assert paths(tool.validate_arguments(arguments)) == ["arguments"]
    assert paths(tool.validate_arguments(arguments, prefix="body.arguments")) == ["body.arguments"]


# --- pomodoro.interrupt -----------------------------------------------------------------------


def test_pomodoro_interrupt_accepts_only_the_empty_object(registry: Registry) -> None:
    tool = registry.tool("pomodoro.interrupt")
    assert tool is not None
    assert tool.validate_arguments({}) == []


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"instance_id": "x"}, ["arguments.instance_id"]),
        ({"operation_id": "y"}, ["arguments.operation_id"]),
        ({"app_scope": "pomodoro", "operation_id": "y"}, ["arguments.app_scope", "arguments.operation_id"]),
    ],
)
def test_pomodoro_interrupt_rejects_every_target_argument(
    registry: Registry, arguments: dict[str, Any], expected: list[str]
) -> None:
    tool = registry.tool("pomodoro.interrupt")
    assert tool is not None
    details = tool.validate_arguments(arguments)
    assert paths(details) == expected
    assert {d.message for d in details} == {"unexpected property"}


# --- interact.ask -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {"prompt": "Ready?"},
        {"prompt": "p" * 2000, "choices": []},
        {"prompt": "Which?", "choices": ["c" * 200] * 10},
    ],
)
def test_interact_ask_accepts_good_arguments(registry: Registry, arguments: dict[str, Any]) -> None:
    tool = registry.tool("interact.ask")
    assert tool is not None
    assert tool.validate_arguments(arguments) == []


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, ["arguments.prompt"]),
        ({"prompt": ""}, ["arguments.prompt"]),
        ({"prompt": "p" * 2001}, ["arguments.prompt"]),
        ({"prompt": 3}, ["arguments.prompt"]),
        ({"prompt": "Which?", "choices": ["a"] * 11}, ["arguments.choices"]),
        ({"prompt": "Which?", "choices": ["a", ""]}, ["arguments.choices[1]"]),
        ({"prompt": "Which?", "choices": ["c" * 201]}, ["arguments.choices[0]"]),
        ({"prompt": "Which?", "choices": "a"}, ["arguments.choices"]),
        ({"prompt": "Which?", "conversation_id": "c"}, ["arguments.conversation_id"]),
    ],
)
def test_interact_ask_rejects_bad_arguments_at_their_path(
    registry: Registry, arguments: dict[str, Any], expected: list[str]
) -> None:
    tool = registry.tool("interact.ask")
    assert tool is not None
    assert paths(tool.validate_arguments(arguments)) == expected
