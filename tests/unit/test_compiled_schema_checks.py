"""The compiled schema checks (service.json_errors) pass exactly what jsonschema passes: every
argument a tool call may carry is decided the same with and without them."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from service.json_errors import _check_of, _compile, validate
from service.manifests import registry_of
from service.settings import Settings

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0, 1, 1500, 1500.0, 14400, 14401, 1.5, -1, 0.0, 200, 201])
    | st.text(max_size=210)
    | st.sampled_from(["", "x", "x" * 200, "x" * 201, "x" * 2000, "x" * 2001]),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


def _shipped_schemas() -> list[dict[str, Any]]:
    registry = registry_of(Settings())
    schemas = [spec.input_schema for spec in registry.tools.values()]
    assert schemas, "no tool schemas in the shipped manifests"
    return schemas


SCHEMAS = [
    *_shipped_schemas(),
    {
        "type": "object",
        "properties": {"n": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 10}},
    },
    {
        "type": "object",
        "properties": {"tags": {"type": "array", "minItems": 1, "items": {"type": "boolean"}}},
    },
    {"type": "object", "minProperties": 1, "properties": {"a": {"type": "null"}, "b": True}},
    {"type": "object", "properties": {"free": {}, "s": {"minLength": 2}}},
]


def _arguments(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    names = [*sorted(schema.get("properties", {})), "other"]
    return st.dictionaries(st.sampled_from(names), json_values, max_size=len(names))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_a_compiled_check_passes_exactly_what_jsonschema_passes(data: st.DataObject) -> None:
    schema = data.draw(st.sampled_from(SCHEMAS))
    check = _compile(schema)
    assert check is not None, schema
    instance = data.draw(_arguments(schema) | json_values)
    assert check(instance) == Draft202012Validator(schema).is_valid(instance), (schema, instance)


def test_the_shipped_tool_schemas_are_all_compiled() -> None:
    for schema in _shipped_schemas():
        assert _check_of(Draft202012Validator(schema)) is not None, schema


def test_a_schema_with_an_unknown_keyword_is_left_to_jsonschema() -> None:
    for schema in (
        {"type": "object", "properties": {"day": {"type": "string", "format": "date"}}},
        {"type": "object", "patternProperties": {"^x": {}}, "additionalProperties": False},
        {"type": ["object", "null"]},
        {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}}},
    ):
        assert _compile(schema) is None, schema


def test_values_of_other_types_than_decoded_json_are_left_to_jsonschema() -> None:
    class Mapping(dict[str, Any]):
        pass

    schema = {"type": "object", "properties": {"inner": {"required": ["a"]}}}
    check = _compile(schema)
    assert check is not None
    assert not check({"inner": Mapping()})
    details = validate(Draft202012Validator(schema), {"inner": Mapping()}, "arguments")
    assert [d.as_dict() for d in details] == [{"path": "arguments.inner.a", "message": "is required"}]
