"""The OpenAPI document: valid OpenAPI 3.1, and every /v1 route documented as its handler behaves."""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from litestar import Litestar
from litestar.handlers import HTTPRouteHandler
from litestar.routes import HTTPRoute
from openapi_spec_validator import OpenAPIV31SpecValidator

from service.api import bodies, host, sdk
from service.api.app import create_app
from service.api.openapi import ENDPOINTS
from service.manifests import Registry
from tests.conftest import make_settings

Json = dict[str, Any]
BODY_MODELS = {name: getattr(module, name) for module in (bodies, host, sdk) for name in dir(module)}
# `read(request, Model)`: how a handler takes its body.
READS_BODY = re.compile(r"\bread\(request, (\w+)\)")


@pytest.fixture(scope="module")
def app(registry: Registry) -> Litestar:
    # No request is made: the database is never reached.
    return create_app(make_settings("postgresql://nobody@127.0.0.1:1/none"), registry, sweeper=False)


@pytest.fixture(scope="module")
def document(app: Litestar) -> Json:
    return app.openapi_schema.to_schema()


def v1_handlers(app: Litestar) -> list[tuple[str, str, HTTPRouteHandler]]:
    """(method, path, handler) of every /v1 route the app serves."""
    found: list[tuple[str, str, HTTPRouteHandler]] = []
    for route in app.routes:
        if isinstance(route, HTTPRoute) and route.path_format.startswith("/v1/"):
            for handler in route.route_handlers:
                if handler.include_in_schema:
                    found += [(method, route.path_format, handler) for method in sorted(handler.http_methods)]
    return found


def operation(document: Json, method: str, path: str) -> Json:
    return dict(document["paths"][path][method.lower()])


def resolve(document: Json, schema: Json) -> Json:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def test_the_document_is_valid_openapi_3_1(document: Json) -> None:
    assert document["openapi"].startswith("3.1.")
    errors = [error.message for error in OpenAPIV31SpecValidator(document).iter_errors()]
    assert errors == []


def test_every_component_schema_is_a_valid_json_schema(document: Json) -> None:
    for schema in document["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)


def test_every_v1_route_is_in_the_table_and_the_document(app: Litestar, document: Json) -> None:
    routes = {(method, path) for method, path, _ in v1_handlers(app)}
    documented = {
        (method.upper(), path)
        for path, item in document["paths"].items()
        if path.startswith("/v1/")
        for method in item
    }
    assert routes == documented
    assert routes <= set(ENDPOINTS)
    assert {key for key in ENDPOINTS if key[1].startswith("/v1/")} == routes


def test_a_route_documents_a_request_body_exactly_when_its_handler_reads_one(
    app: Litestar, document: Json
) -> None:
    for method, path, handler in v1_handlers(app):
        read = READS_BODY.search(inspect.getsource(handler.fn))
        body = operation(document, method, path).get("requestBody")
        if read is None:
            assert body is None, (method, path)
            continue
        model = BODY_MODELS[read.group(1)]
        assert body is not None and body["required"] is True, (method, path)
        assert body["content"]["application/json"]["schema"] == {
            "$ref": f"#/components/schemas/{model.__name__}"
        }
        documented = dict(document["components"]["schemas"][model.__name__])
        expected = model.model_json_schema(ref_template="#/components/schemas/{model}")
        expected.pop("$defs", None)
        assert documented == expected, (method, path)


def test_a_handler_with_a_fixed_status_documents_it(app: Litestar, document: Json) -> None:
    for method, path, handler in v1_handlers(app):
        responses = operation(document, method, path)["responses"]
        statuses = {int(status) for status in responses if int(status) < 400}
        if handler.status_code not in statuses:
            # Only the tool call answers with a status of its own choosing (200 or 202).
            assert (method, path) == ("POST", "/v1/tool-calls")
            assert statuses == {200, 202}


def test_every_protected_operation_documents_its_scheme_and_401(document: Json) -> None:
    schemes = document["components"]["securitySchemes"]
    for name in ("agent", "host", "operator", "capability"):
        assert schemes[name] == {
            "type": "http",
            "scheme": "bearer",
            "description": schemes[name]["description"],
        }
    audiences = {"/v1/host/": "host", "/v1/sdk/": "capability", "/v1/ops/": "operator", "/v1/": "agent"}
    for path, item in document["paths"].items():
        for method, op in item.items():
            if not path.startswith("/v1/"):
                assert "security" not in op and "401" not in op["responses"], (method, path)
                continue
            audience = next(name for prefix, name in audiences.items() if path.startswith(prefix))
            assert op["security"][0] == {audience: []}, (method, path)
            assert error_codes(document, op["responses"]["401"]) == ["unauthorized"]


def error_codes(document: Json, response: Json) -> list[str]:
    schema = response["content"]["application/json"]["schema"]
    assert schema["allOf"][0] == {"$ref": "#/components/schemas/Error"}
    return list(schema["allOf"][1]["properties"]["error"]["enum"])


def test_every_error_answer_has_the_error_body(document: Json) -> None:
    error = document["components"]["schemas"]["Error"]
    assert error["required"] == ["error", "message"]
    assert error.get("additionalProperties", True) is True
    for path, item in document["paths"].items():
        for method, op in item.items() if path.startswith("/v1/") else ():
            for status, response in op["responses"].items():
                if int(status) >= 400:
                    assert error_codes(document, response), (method, path, status)


def test_a_body_operation_documents_the_body_errors(document: Json) -> None:
    for path, item in document["paths"].items():
        for method, op in item.items():
            if "requestBody" in op:
                responses = op["responses"]
                assert "malformed_json" in error_codes(document, responses["400"]), (method, path)
                assert "request_too_large" in error_codes(document, responses["413"]), (method, path)
                assert "invalid_request" in error_codes(document, responses["422"]), (method, path)


def test_the_contract_statuses_of_the_tool_call(document: Json) -> None:
    responses = operation(document, "POST", "/v1/tool-calls")["responses"]
    accepted = responses["202"]["content"]["application/json"]["schema"]["oneOf"]
    assert [resolve(document, s)["properties"]["status"] for s in accepted] == [{"const": "accepted"}] * 2
    assert error_codes(document, responses["404"]) == ["unknown_tool"]
    assert error_codes(document, responses["409"]) == ["operation_already_focusing", "idempotency_key_reused"]
    assert error_codes(document, responses["422"]) == ["invalid_request", "invalid_arguments"]
    created = operation(document, "POST", "/v1/host/conversations/{conversation_id}/messages")["responses"]
    assert "201" in created and "200" not in created


def test_the_event_stream_is_documented_as_one(document: Json) -> None:
    events = operation(document, "GET", "/v1/host/conversations/{conversation_id}/events")
    assert list(events["responses"]["200"]["content"]) == ["text/event-stream"]
    assert {p["name"] for p in events["parameters"]} == {"conversation_id", "after", "Last-Event-ID"}


UUID_1, UUID_2, UUID_3 = (f"{n}0000000-0000-4000-8000-000000000000" for n in range(1, 4))
T0, T1 = "2026-01-01T10:00:00.000000Z", "2026-01-01T10:25:00.000000Z"
POMODORO_RESULT = {
    "state": "completed",
    "reason": "deadline_reached",
    "activity": "write report",
    "duration_seconds": 1500,
    "started_at": T0,
    "ends_at": T1,
    "finalized_at": T1,
    "focused_seconds": 1500,
}
# The contract's examples (CONTRACT.md), with real ids and times.
CONTRACT_EXAMPLES = [
    (
        "PomodoroStartAccepted",
        {
            "tool_call_id": "call-1",
            "status": "accepted",
            "operation": {
                "operation_id": UUID_1,
                "state": "focusing",
                "started_at": T0,
                "ends_at": T1,
                "duration_seconds": 1500,
                "activity": "write report",
            },
            "instance_id": UUID_2,
            "sub_session_id": UUID_3,
        },
    ),
    ("PomodoroInterruptReceipt", {"tool_call_id": "c", "status": "interrupted", "operation_id": UUID_1}),
    (
        "PomodoroInterruptReceipt",
        {
            "tool_call_id": "c",
            "status": "operation_already_final",
            "operation_id": UUID_1,
            "final_state": "completed",
        },
    ),
    ("PomodoroInterruptReceipt", {"tool_call_id": "c", "status": "no_active_focusing_operation"}),
    (
        "ToolResultEvent",
        {
            "event_id": UUID_2,
            "type": "tool.result",
            "tool": "pomodoro.start",
            "tool_call_id": "call-1",
            "conversation_id": "conv-1",
            "operation_id": UUID_1,
            "sequence": 1,
            "result": POMODORO_RESULT,
        },
    ),
    (
        "DeliveryAttempt",
        {
            "attempt": 1,
            "relay_id": "relay-1",
            "started_at": T0,
            "duration_ms": 12,
            "status_code": None,
            "error_class": "ConnectError",
            "response_excerpt": None,
            "outcome": "retry",
        },
    ),
    ("Error", {"error": "invalid_request", "message": "m", "details": [{"path": "$", "message": "m"}]}),
]
NOT_CONTRACT = [
    ("PomodoroInterruptReceipt", {"tool_call_id": "c", "status": "interrupted"}),
    ("PomodoroStartAccepted", {"tool_call_id": "c", "status": "accepted"}),
    ("Error", {"error": "unauthorized"}),
]


def component(document: Json, name: str) -> Draft202012Validator:
    root = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)


@pytest.mark.parametrize(("name", "example"), CONTRACT_EXAMPLES)
def test_the_contract_examples_match_their_schemas(document: Json, name: str, example: Json) -> None:
    assert [error.message for error in component(document, name).iter_errors(example)] == []


@pytest.mark.parametrize(("name", "example"), NOT_CONTRACT)
def test_bodies_missing_contract_keys_do_not(document: Json, name: str, example: Json) -> None:
    assert not component(document, name).is_valid(example)
