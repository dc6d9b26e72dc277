from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from service.json_errors import ErrorDetail
from service.manifests import InstanceStateFeature, ManifestError, Registry, load_registry

SHIPPED = Path(__file__).resolve().parents[2] / "manifests"
OPERATION_ID = "0b6f3a52-9a43-4f4e-9d0a-3f7d3c1f2e10"


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_registry(SHIPPED)


def paths(details: list[ErrorDetail]) -> list[str]:
    return [d.path for d in details]


def shipped(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SHIPPED / name).read_text())
    return data


def write(directory: Path, name: str, doc: object) -> Path:
    path = directory / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


@pytest.fixture
def manifests_dir(tmp_path: Path) -> Path:
    """A directory with only the Interact manifest (the one every registry needs)."""
    shutil.copy(SHIPPED / "interact.json", tmp_path / "interact.json")
    return tmp_path


def minimal(scope: str = "timer", **tool: Any) -> dict[str, Any]:
    spec = {
        "name": f"{scope}.go",
        "kind": "direct",
        "description": "Go.",
        "input_schema": {"type": "object"},
    } | tool
    return {
        "manifest_version": 1,
        "app_scope": scope,
        "name": scope.title(),
        "description": "An app.",
        "surface": {"kind": "builtin"},
        "tools": [spec],
    }


# --- the shipped manifests --------------------------------------------------------------------


def test_shipped_manifests_load_with_their_surfaces_and_features(registry: Registry) -> None:
    assert sorted(registry.apps) == ["interact", "pomodoro", "whiteboard"]
    pomodoro = registry.app("pomodoro")
    assert pomodoro is not None
    assert (pomodoro.surface_kind, pomodoro.entry) == ("workspace", "/apps/pomodoro/")
    assert pomodoro.file.endswith("pomodoro.json")
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
    assert [t["name"] for t in tools] == ["interact.ask", "pomodoro.interrupt", "pomodoro.start"]
    assert all(set(t) == {"name", "app_scope", "kind", "description", "input_schema"} for t in tools)
    kinds = {t["name"]: (t["app_scope"], t["kind"]) for t in tools}
    assert kinds == {
        "interact.ask": ("interact", "operation"),
        "pomodoro.interrupt": ("pomodoro", "direct"),
        "pomodoro.start": ("pomodoro", "operation"),
    }


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


# --- instance state ---------------------------------------------------------------------------


def pomodoro_state(registry: Registry) -> InstanceStateFeature:
    app = registry.app("pomodoro")
    assert app is not None
    assert app.instance_state is not None
    return app.instance_state


def whiteboard_state(registry: Registry) -> InstanceStateFeature:
    app = registry.app("whiteboard")
    assert app is not None
    assert app.instance_state is not None
    return app.instance_state


GOOD_SNAPSHOT = {
    "activity": "write report",
    "operation_id": OPERATION_ID,
    "started_at": "2025-01-01T10:00:00Z",
    "ends_at": "2025-01-01T10:25:00.123456+00:00",
    "display_state": "focusing",
}


@pytest.mark.parametrize("data", [{}, GOOD_SNAPSHOT, {"activity": None, "display_state": "cancelled"}])
def test_pomodoro_state_accepts_display_snapshots(registry: Registry, data: dict[str, Any]) -> None:
    assert pomodoro_state(registry).validate_state(data) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"remaining_seconds": 300}, ["data.remaining_seconds"]),
        ({"operation_id": "not-a-uuid"}, ["data.operation_id"]),
        ({"operation_id": OPERATION_ID.replace("-", "")}, ["data.operation_id"]),
        ({"started_at": "2025-13-01T10:00:00Z"}, ["data.started_at"]),
        ({"ends_at": "tomorrow"}, ["data.ends_at"]),
        ({"ends_at": "2025-01-01 10:25"}, ["data.ends_at"]),
        ({"display_state": "paused"}, ["data.display_state"]),
        ({"activity": "a" * 201}, ["data.activity"]),
    ],
)
def test_pomodoro_state_rejects_anything_but_display_data(
    registry: Registry, change: dict[str, Any], expected: list[str]
) -> None:
    assert paths(pomodoro_state(registry).validate_state(GOOD_SNAPSHOT | change)) == expected


def test_pomodoro_state_format_messages(registry: Registry) -> None:
    details = pomodoro_state(registry).validate_state(
        {"operation_id": "nope", "started_at": "yesterday"}, prefix="body.data"
    )
    assert [d.as_dict() for d in details] == [
        {"path": "body.data.operation_id", "message": "'nope' is not a 'uuid'"},
        {"path": "body.data.started_at", "message": "'yesterday' is not a 'date-time'"},
    ]


def test_non_object_state_gives_one_detail_at_the_prefix(registry: Registry) -> None:
    assert paths(pomodoro_state(registry).validate_state([GOOD_SNAPSHOT])) == ["data"]


def test_whiteboard_state_accepts_strokes(registry: Registry) -> None:
    data = {"strokes": [{"color": "#00ff7f", "width": 3, "points": [[0, 0], [1.5, -2]]}]}
    assert whiteboard_state(registry).validate_state(data) == []


@pytest.mark.parametrize(
    ("stroke", "expected"),
    [
        ({"color": "#00FF7F", "width": 3, "points": [[0, 0]]}, ["data.strokes[1].color"]),
        ({"color": "#00ff7f", "width": 21, "points": [[0, 0]]}, ["data.strokes[1].width"]),
        ({"color": "#00ff7f", "width": 3, "points": []}, ["data.strokes[1].points"]),
        ({"color": "#00ff7f", "width": 3, "points": [[0, 0], [1]]}, ["data.strokes[1].points[1]"]),
        ({"color": "#00ff7f", "width": 3, "points": [[0, 0, 0]]}, ["data.strokes[1].points[0]"]),
        ({"color": "#00ff7f", "width": 3, "points": [[0, "1"]]}, ["data.strokes[1].points[0][1]"]),
        ({"color": "#00ff7f", "width": 3, "points": [[0, 0]], "fill": True}, ["data.strokes[1].fill"]),
        ({"width": 3, "points": [[0, 0]]}, ["data.strokes[1].color"]),
    ],
)
def test_whiteboard_state_rejects_malformed_strokes(
    registry: Registry, stroke: dict[str, Any], expected: list[str]
) -> None:
    good = {"color": "#000000", "width": 1, "points": [[0, 0]]}
    assert paths(whiteboard_state(registry).validate_state({"strokes": [good, stroke]})) == expected


def test_whiteboard_state_is_capped_at_500_strokes(registry: Registry) -> None:
    stroke = {"color": "#000000", "width": 1, "points": [[0, 0]]}
    assert paths(whiteboard_state(registry).validate_state({"strokes": [stroke] * 501})) == ["data.strokes"]


def test_state_schemas_are_isolated_between_apps(registry: Registry) -> None:
    pomodoro, whiteboard = pomodoro_state(registry), whiteboard_state(registry)
    stroke = {"color": "#000000", "width": 1, "points": [[0, 0]]}
    assert paths(pomodoro.validate_state({"strokes": [stroke]})) == ["data.strokes"]
    assert paths(whiteboard.validate_state(GOOD_SNAPSHOT)) == [
        "data.activity",
        "data.display_state",
        "data.ends_at",
        "data.operation_id",
        "data.started_at",
    ]


# --- loading errors ---------------------------------------------------------------------------


def test_a_directory_with_only_interact_loads(manifests_dir: Path) -> None:
    registry = load_registry(manifests_dir)
    assert list(registry.apps) == ["interact"]
    assert [t["name"] for t in registry.public_tools()] == ["interact.ask"]


def test_a_manifest_in_the_directory_is_loaded(manifests_dir: Path) -> None:
    write(manifests_dir, "timer.json", minimal())
    registry = load_registry(manifests_dir)
    tool = registry.tool("timer.go")
    assert tool is not None
    assert tool.app_scope == "timer"


def test_the_schema_file_in_the_directory_is_used_and_not_loaded_as_a_manifest(manifests_dir: Path) -> None:
    schema = json.loads((SHIPPED / "manifest.schema.json").read_text())
    schema["properties"]["name"]["maxLength"] = 3
    write(manifests_dir, "manifest.schema.json", schema)
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    assert (Path(caught.value.file).name, caught.value.path) == ("interact.json", "$.name")


def test_invalid_json_names_the_file_line_and_column(manifests_dir: Path) -> None:
    write(manifests_dir, "broken.json", '{"manifest_version": 1,\n  "app_scope": }')
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    error = caught.value
    assert Path(error.file).name == "broken.json"
    assert error.path == "$"
    assert "line 2" in error.reason
    assert "column" in error.reason
    assert str(error) == f"{error.file}: $: {error.reason}"


@pytest.mark.parametrize("content", [b'{"a": 1, "a": 2}', b'{"a": NaN}', b"\xff{}", b"[" * 100_000])
def test_questionable_json_is_refused(manifests_dir: Path, content: bytes) -> None:
    (manifests_dir / "odd.json").write_bytes(content)
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    assert (Path(caught.value.file).name, caught.value.path) == ("odd.json", "$")


def test_a_wrong_tool_kind_points_at_the_kind(manifests_dir: Path) -> None:
    write(manifests_dir, "timer.json", minimal(kind="background"))
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    error = caught.value
    assert (Path(error.file).name, error.path) == ("timer.json", "$.tools[0].kind")
    assert "'background' is not one of" in error.reason
    assert str(error).endswith("timer.json: $.tools[0].kind: " + error.reason)


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda m: m.update(extra=1), "$"),
        (lambda m: m.update(app_scope="Timer"), "$.app_scope"),
        (lambda m: m.update(manifest_version=2), "$.manifest_version"),
        (lambda m: m.pop("tools"), "$"),
        (lambda m: m["surface"].update(kind="workspace"), "$.surface"),
        (lambda m: m["tools"][0].update(name="timer"), "$.tools[0].name"),
        (lambda m: m["tools"][0].update(input_schema={"type": "array"}), "$.tools[0].input_schema.type"),
        (
            lambda m: m.update(
                features={
                    "app.instance-state.v1": {
                        "state_schema_version": 1,
                        "state_schema": {"type": "object"},
                        "max_bytes": 2_000_000,
                        "retention": "retain_readonly",
                    }
                }
            ),
            '$.features["app.instance-state.v1"].max_bytes',
        ),
        (lambda m: m.update(features={"app.other.v1": {}}), "$.features"),
    ],
)
def test_schema_violations_point_at_the_failing_element(manifests_dir: Path, mutate: Any, path: str) -> None:
    doc = minimal()
    mutate(doc)
    write(manifests_dir, "timer.json", doc)
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    assert (Path(caught.value.file).name, caught.value.path) == ("timer.json", path)
    assert caught.value.reason


def test_a_tool_name_without_the_app_prefix_is_refused(manifests_dir: Path) -> None:
    write(manifests_dir, "timer.json", minimal(name="clock.go"))
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    error = caught.value
    assert (Path(error.file).name, error.path) == ("timer.json", "$.tools[0].name")
    assert "'timer.'" in error.reason


def test_a_duplicate_app_scope_across_files_is_refused(manifests_dir: Path) -> None:
    write(manifests_dir, "zz-interact-again.json", shipped("interact.json"))
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    error = caught.value
    assert (Path(error.file).name, error.path) == ("zz-interact-again.json", "$.app_scope")
    assert "interact.json" in error.reason


def test_a_duplicate_tool_name_in_one_file_is_refused(manifests_dir: Path) -> None:
    doc = minimal()
    doc["tools"].append(copy.deepcopy(doc["tools"][0]))
    write(manifests_dir, "timer.json", doc)
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    assert caught.value.path == "$.tools[1].name"


@pytest.mark.parametrize(
    ("input_schema", "path"),
    [
        (
            {"type": "object", "properties": {"n": {"type": "integer", "minimum": "one"}}},
            "$.tools[0].input_schema.properties.n.minimum",
        ),
        ({"type": "object", "required": "n"}, "$.tools[0].input_schema.required"),
        ({"type": "object", "patternProperties": {"[": {}}}, "$.tools[0].input_schema.patternProperties"),
        (
            {"type": "object", "properties": {"n": {"$ref": "https://example.com/n.json"}}},
            '$.tools[0].input_schema.properties.n["$ref"]',
        ),
        (
            {"type": "object", "properties": {"n": {"$ref": "#/$defs/missing"}}},
            '$.tools[0].input_schema.properties.n["$ref"]',
        ),
        (
            {"type": "object", "$schema": "http://json-schema.org/draft-07/schema#"},
            '$.tools[0].input_schema["$schema"]',
        ),
    ],
)
def test_an_invalid_input_schema_is_refused(manifests_dir: Path, input_schema: Any, path: str) -> None:
    write(manifests_dir, "timer.json", minimal(input_schema=input_schema))
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    assert (Path(caught.value.file).name, caught.value.path) == ("timer.json", path)


def test_a_local_ref_in_an_input_schema_works(manifests_dir: Path) -> None:
    schema = {
        "type": "object",
        "$defs": {"n": {"type": "integer"}},
        "properties": {"n": {"$ref": "#/$defs/n"}},
    }
    write(manifests_dir, "timer.json", minimal(input_schema=schema))
    tool = load_registry(manifests_dir).tool("timer.go")
    assert tool is not None
    assert paths(tool.validate_arguments({"n": "x"})) == ["arguments.n"]


def test_a_state_schema_format_that_cannot_be_asserted_is_refused(manifests_dir: Path) -> None:
    doc = minimal()
    doc["features"] = {
        "app.instance-state.v1": {
            "state_schema_version": 1,
            "max_bytes": 100,
            "retention": "delete_on_close",
            "state_schema": {
                "type": "object",
                "properties": {"at": {"type": "string", "format": "date_time"}},
            },
        }
    }
    write(manifests_dir, "timer.json", doc)
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    assert caught.value.path == '$.features["app.instance-state.v1"].state_schema.properties.at.format'


def test_a_missing_interact_manifest_is_refused_naming_the_directory(tmp_path: Path) -> None:
    write(tmp_path, "timer.json", minimal())
    with pytest.raises(ManifestError) as caught:
        load_registry(tmp_path)
    assert caught.value.file == str(tmp_path)
    assert "interact" in caught.value.reason


def test_an_empty_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        load_registry(tmp_path)
    assert caught.value.file == str(tmp_path)


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestError):
        load_registry(tmp_path / "absent")


def test_a_manifest_that_is_not_an_object_is_refused(manifests_dir: Path) -> None:
    write(manifests_dir, "list.json", [minimal()])
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    assert (Path(caught.value.file).name, caught.value.path) == ("list.json", "$")
