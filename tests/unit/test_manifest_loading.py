"""Loading a directory of app folders: what is loaded, and every way a directory is refused with
the file and the place named (a manifest's file is ``<app>/manifest.json``)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from service.manifests import ManifestError, load_registry
from tests.support.manifests import SHIPPED, minimal, paths, shipped, write


@pytest.fixture
def manifests_dir(tmp_path: Path) -> Path:
    """A directory with only the Interact manifest (the one every registry needs)."""
    (tmp_path / "interact").mkdir()
    shutil.copy(SHIPPED / "interact" / "manifest.json", tmp_path / "interact" / "manifest.json")
    return tmp_path


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
    assert (Path(caught.value.file).parent.name, caught.value.path) == ("interact", "$.name")


def test_invalid_json_names_the_file_line_and_column(manifests_dir: Path) -> None:
    write(manifests_dir, "broken.json", '{"manifest_version": 1,\n  "app_scope": }')
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    error = caught.value
    assert Path(error.file).parent.name == "broken"
    assert error.path == "$"
    assert "line 2" in error.reason
    assert "column" in error.reason
    assert str(error) == f"{error.file}: $: {error.reason}"


@pytest.mark.parametrize("content", [b'{"a": 1, "a": 2}', b'{"a": NaN}', b"\xff{}", b"[" * 100_000])
def test_questionable_json_is_refused(manifests_dir: Path, content: bytes) -> None:
    (manifests_dir / "odd").mkdir()
    (manifests_dir / "odd" / "manifest.json").write_bytes(content)
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    assert (Path(caught.value.file).parent.name, caught.value.path) == ("odd", "$")


def test_a_wrong_tool_kind_points_at_the_kind(manifests_dir: Path) -> None:
    write(manifests_dir, "timer.json", minimal(kind="background"))
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    error = caught.value
    assert (Path(error.file).parent.name, error.path) == ("timer", "$.tools[0].kind")
    assert "'background' is not one of" in error.reason
    assert str(error).endswith("timer/manifest.json: $.tools[0].kind: " + error.reason)


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
    assert (Path(caught.value.file).parent.name, caught.value.path) == ("timer", path)
    assert caught.value.reason


def test_a_tool_name_without_the_app_prefix_is_refused(manifests_dir: Path) -> None:
    write(manifests_dir, "timer.json", minimal(name="clock.go"))
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    error = caught.value
    assert (Path(error.file).parent.name, error.path) == ("timer", "$.tools[0].name")
    assert "'timer.'" in error.reason


def test_a_duplicate_app_scope_across_files_is_refused(manifests_dir: Path) -> None:
    write(manifests_dir, "zz-interact-again.json", shipped("interact.json"))
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    error = caught.value
    assert (Path(error.file).parent.name, error.path) == ("zz-interact-again", "$.app_scope")
    assert "interact" in error.reason


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
    assert (Path(caught.value.file).parent.name, caught.value.path) == ("timer", path)


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
    assert (Path(caught.value.file).parent.name, caught.value.path) == ("list", "$")


FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def test_a_tools_input_rounds_are_loaded_in_their_order(manifests_dir: Path) -> None:
    rounds = [
        {"who": {"method": "elicitation/create", "params": {"message": "Who?", "requestedSchema": FORM}}},
        {"where": {"method": "roots/list", "params": {}}},
    ]
    write(manifests_dir, "timer.json", minimal(input_rounds=rounds))
    tool = load_registry(manifests_dir).tool("timer.go")
    assert tool is not None
    assert [list(asked) for asked in tool.input_rounds] == [["who"], ["where"]]


@pytest.mark.parametrize(
    ("request_", "path"),
    [
        ({"method": "tools/call", "params": {}}, "$.tools[0].input_rounds[0].k.method"),
        ({"method": "roots/list", "params": {"x": 1}}, "$.tools[0].input_rounds[0].k.params"),
        (
            {"method": "sampling/createMessage", "params": {"messages": []}},
            "$.tools[0].input_rounds[0].k.params",
        ),
        (
            {
                "method": "elicitation/create",
                "params": {"message": "?", "requestedSchema": {**FORM, "type": 1}},
            },
            "$.tools[0].input_rounds[0].k.params.requestedSchema.type",
        ),
        (
            {
                "method": "elicitation/create",
                "params": {
                    "message": "?",
                    "requestedSchema": {**FORM, "properties": {"d": {"format": "nope"}}},
                },
            },
            "$.tools[0].input_rounds[0].k.params.requestedSchema.properties.d.format",
        ),
    ],
)
def test_an_input_round_that_no_client_could_run_is_refused_at_load(
    manifests_dir: Path, request_: dict[str, Any], path: str
) -> None:
    write(manifests_dir, "timer.json", minimal(input_rounds=[{"k": request_}]))
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    assert (Path(caught.value.file).parent.name, caught.value.path) == ("timer", path)


@pytest.mark.parametrize(
    ("annotated", "reason"),
    [
        ({"type": "number", "x-mcp-header": "Ratio"}, "integer/string/boolean"),
        ({"type": "string", "x-mcp-header": "Two words"}, "RFC 9110 token"),
        ({"type": "string", "x-mcp-header": ""}, "RFC 9110 token"),
        ({"type": "string", "x-mcp-header": 7}, "must be a string"),
        ({"type": "object", "properties": {"m": {"type": "string", "x-mcp-header": "Deep"}}}, None),
    ],
)
def test_an_x_mcp_header_annotation_clients_would_drop_is_refused(
    manifests_dir: Path, annotated: dict[str, Any], reason: str | None
) -> None:
    schema = {"type": "object", "properties": {"n": annotated, "o": {"type": "string", "x-mcp-header": "O"}}}
    write(manifests_dir, "timer.json", minimal(input_schema=schema))
    if reason is None:  # reached through properties alone, at any depth: valid (SEP-2243)
        assert load_registry(manifests_dir).tool("timer.go") is not None
        return
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    assert caught.value.path == "$.tools[0].input_schema"
    assert reason in caught.value.reason


def test_an_x_mcp_header_twice_in_one_schema_is_refused(manifests_dir: Path) -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "x-mcp-header": "Region"},
            "b": {"type": "string", "x-mcp-header": "region"},
        },
    }
    write(manifests_dir, "timer.json", minimal(input_schema=schema))
    with pytest.raises(ManifestError, match="duplicates"):
        load_registry(manifests_dir)


def _sampling_of(text: object) -> dict[str, Any]:
    return {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": 10,
        },
    }


@pytest.mark.parametrize(
    ("input_schema", "reference"),
    [
        ({"type": "object", "properties": {"prompt": {"type": "string"}}}, "prompt"),  # not required
        (
            {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}},
            "n",
        ),  # not a string
        ({"type": "object", "required": ["prompt"], "properties": {"prompt": {"type": "string"}}}, "other"),
    ],
)
def test_an_input_request_standing_for_an_argument_names_a_required_string_argument(
    manifests_dir: Path, input_schema: dict[str, Any], reference: str
) -> None:
    tool: dict[str, Any] = {
        "input_schema": input_schema,
        "input_rounds": [{"llm": _sampling_of({"$argument": reference})}],
    }
    write(manifests_dir, "timer.json", minimal(**tool))
    with pytest.raises(ManifestError) as caught:
        load_registry(manifests_dir)
    assert caught.value.path == "$.tools[0].input_rounds[0].llm.params.messages[0].content.text"


def test_an_input_request_standing_for_a_required_string_argument_loads(manifests_dir: Path) -> None:
    schema = {"type": "object", "required": ["prompt"], "properties": {"prompt": {"type": "string"}}}
    tool: dict[str, Any] = {
        "input_schema": schema,
        "input_rounds": [{"llm": _sampling_of({"$argument": "prompt"})}],
    }
    write(manifests_dir, "timer.json", minimal(**tool))
    spec = load_registry(manifests_dir).tool("timer.go")
    assert spec is not None and spec.input_rounds[0]["llm"]["params"]["messages"][0]["content"]["text"] == {
        "$argument": "prompt"
    }
