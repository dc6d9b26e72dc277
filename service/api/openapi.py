"""The service's OpenAPI document: request bodies, real statuses, error bodies and security.

The handlers read their bodies themselves (``service.api.bodies.read``) and answer with plain
dicts, so the document Litestar generates knows neither the bodies nor the statuses. ``document``
completes it in place from one table, ``ENDPOINTS``, keyed by (method, path). Rules that hold for
every endpoint are applied here rather than repeated in the table: a protected endpoint can answer
401, one that takes a body 400/413/422, one with a path parameter 404 (a parameter holding ``/``
reaches no route).

JSON Schemas are plain dicts, handed to Litestar wrapped in ``JsonSchema`` so that they are
rendered verbatim (Litestar's own rendering drops every key whose value is ``None``, such as a
pydantic ``"default": null``).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from litestar import Litestar
from litestar.openapi.spec import (
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIResponse,
    Operation,
    Parameter,
    Reference,
    RequestBody,
    Schema,
    SecurityScheme,
)
from pydantic import BaseModel

from service.api.bodies import ToolCallBody
from service.api.host import AnswerBody, ForegroundBody, MessageBody, SurfaceEventBody
from service.api.host_session import COOKIE_NAME
from service.api.sdk import StateWrite
from service.db.operator_queries import ATTEMPT_OUTCOMES
from service.db.tables import OPERATION_REASONS, OPERATION_STATES, OUTBOX_STATUSES

Json = dict[str, Any]
JSON = "application/json"
REF = "#/components/schemas/{model}"

# --- JSON Schema building blocks -------------------------------------------------------------

STRING: Json = {"type": "string"}
INTEGER: Json = {"type": "integer"}
COUNT: Json = {"type": "integer", "minimum": 0}
BOOLEAN: Json = {"type": "boolean"}
OBJECT: Json = {"type": "object"}
UUID: Json = {"type": "string", "format": "uuid"}
TIME: Json = {"type": "string", "format": "date-time"}
ID: Json = {"type": "string", "minLength": 1, "maxLength": 255}
LIMIT: Json = {"type": "integer", "minimum": 1, "maximum": 1000}


def ref(name: str) -> Json:
    return {"$ref": REF.format(model=name)}


def nullable(schema: Json) -> Json:
    return {"anyOf": [schema, {"type": "null"}]}


def enum(values: Iterable[str]) -> Json:
    return {"type": "string", "enum": list(values)}


def const(value: str | bool) -> Json:
    return {"const": value}


def array(items: Json) -> Json:
    return {"type": "array", "items": items}


def obj(properties: Mapping[str, Json], *, optional: Iterable[str] = ()) -> Json:
    """An object whose properties are all required except ``optional``.

    Open to other properties: the contract changes only by adding fields. (Request bodies are
    closed; their schemas come from their pydantic models.)
    """
    optional = set(optional)
    return {
        "type": "object",
        "properties": dict(properties),
        "required": [name for name in properties if name not in optional],
    }


OPERATION_STATE = enum(OPERATION_STATES)
OPERATION_REASON = nullable(enum(OPERATION_REASONS))

# --- Components: every shared schema, referenced with $ref -----------------------------------

RESPONSE_SCHEMAS: dict[str, Json] = {
    "Error": {
        "type": "object",
        "description": "Every error body. Some codes add fields (operation_id, revision, size_bytes, ...).",
        "properties": {
            "error": STRING,
            "message": STRING,
            "details": array(obj({"path": STRING, "message": STRING})),
            "operation_id": UUID,
            "revision": COUNT,
            "size_bytes": COUNT,
            "max_bytes": COUNT,
        },
        "required": ["error", "message"],
    },
    "Tool": obj(
        {
            "name": STRING,
            "app_scope": STRING,
            "kind": enum(("direct", "launch", "foreground", "operation")),
            "description": STRING,
            "input_schema": OBJECT,
        }
    ),
    "ToolList": obj({"tools": array(ref("Tool"))}),
    "PomodoroStartAccepted": obj(
        {
            "tool_call_id": STRING,
            "status": const("accepted"),
            "operation": obj(
                {
                    "operation_id": UUID,
                    "state": OPERATION_STATE,
                    "started_at": TIME,
                    "ends_at": TIME,
                    "duration_seconds": {"type": "integer", "minimum": 1, "maximum": 14400},
                    "activity": nullable(STRING),
                }
            ),
            "instance_id": UUID,
            "sub_session_id": UUID,
        }
    ),
    "InteractAskAccepted": obj(
        {"tool_call_id": STRING, "status": const("accepted"), "interaction": ref("Interaction")}
    ),
    "PomodoroInterruptReceipt": {
        "oneOf": [
            obj({"tool_call_id": STRING, "status": const("interrupted"), "operation_id": UUID}),
            obj(
                {
                    "tool_call_id": STRING,
                    "status": const("operation_already_final"),
                    "operation_id": UUID,
                    "final_state": enum(s for s in OPERATION_STATES if s != "focusing"),
                }
            ),
            obj({"tool_call_id": STRING, "status": const("no_active_focusing_operation")}),
        ]
    },
    "PomodoroResult": obj(
        {
            "state": enum(s for s in OPERATION_STATES if s != "focusing"),
            "reason": enum(OPERATION_REASONS),
            "activity": nullable(STRING),
            "duration_seconds": INTEGER,
            "started_at": TIME,
            "ends_at": TIME,
            "finalized_at": TIME,
            "focused_seconds": COUNT,
        }
    ),
    "InteractResult": obj({"state": const("answered"), "answer": STRING, "answered_at": TIME}),
    "Operation": obj(
        {
            "operation_id": UUID,
            "tool": STRING,
            "tool_call_id": STRING,
            "conversation_id": STRING,
            "app_scope": STRING,
            "instance_id": UUID,
            "state": OPERATION_STATE,
            "reason": OPERATION_REASON,
            "activity": nullable(STRING),
            "duration_seconds": INTEGER,
            "started_at": TIME,
            "ends_at": TIME,
            "finalized_at": nullable(TIME),
            "done": BOOLEAN,
            "result": nullable(ref("PomodoroResult")),
        }
    ),
    "Interaction": obj(
        {
            "tool_call_id": STRING,
            "conversation_id": STRING,
            "prompt": STRING,
            "choices": array(STRING),
            "status": enum(("pending", "answered")),
            "asked_in_sub_session_id": nullable(UUID),
            "answer": nullable(STRING),
            "answered_at": nullable(TIME),
        },
        optional=("answer", "answered_at"),
    ),
    "Workspace": obj(
        {
            "conversation_id": STRING,
            "foreground": {"oneOf": [const("interact"), obj({"app_scope": STRING, "instance_id": UUID})]},
            "instances": array(
                obj(
                    {
                        "instance_id": UUID,
                        "app_scope": STRING,
                        "status": enum(("open", "closed")),
                        "sub_session_id": nullable(UUID),
                    }
                )
            ),
            "focusing_operation": nullable(ref("Operation")),
            "pending_interactions": array(ref("Interaction")),
            "server_time": TIME,
        }
    ),
    "Message": obj(
        {
            "message_id": UUID,
            "conversation_id": STRING,
            "sub_session_id": nullable(UUID),
            "role": enum(("user", "agent")),
            "text": STRING,
            "created_at": TIME,
        }
    ),
    "MessageList": obj({"messages": array(ref("Message"))}),
    "CloseResult": obj(
        {
            "instance_id": UUID,
            "app_scope": STRING,
            "status": const("closed"),
            "operation": nullable(
                obj({"operation_id": UUID, "state": OPERATION_STATE, "reason": OPERATION_REASON})
            ),
        }
    ),
    "SurfaceEventResult": obj({"interrupted": const(False)}),
    "Capability": obj({"capability": STRING}),
    "InteractionReceipt": obj(
        {"tool_call_id": STRING, "status": const("answered"), "answer": STRING, "answered_at": TIME}
    ),
    "SdkContext": obj(
        {
            "app_scope": STRING,
            "instance_id": UUID,
            "conversation_id": STRING,
            "status": enum(("open", "closed")),
            "operation": nullable(
                obj(
                    {
                        "operation_id": UUID,
                        "state": OPERATION_STATE,
                        "reason": OPERATION_REASON,
                        "activity": nullable(STRING),
                        "started_at": TIME,
                        "ends_at": TIME,
                    }
                )
            ),
            "server_time": TIME,
        }
    ),
    "InstanceState": obj(
        {
            "schema_version": {"type": "integer", "minimum": 1},
            "revision": COUNT,
            "data": OBJECT,
            "readonly": BOOLEAN,
            "deleted": const(True),
        },
        optional=("deleted",),
    ),
    "StateRevision": obj({"revision": COUNT}),
    "ToolResultEvent": obj(
        {
            "event_id": UUID,
            "type": const("tool.result"),
            "tool": STRING,
            "tool_call_id": STRING,
            "conversation_id": STRING,
            "operation_id": nullable(UUID),
            "sequence": COUNT,
            "result": {"anyOf": [ref("PomodoroResult"), ref("InteractResult")]},
        }
    ),
    "OutboxRow": obj(
        {
            "event_id": UUID,
            "operation_id": nullable(UUID),
            "tool": STRING,
            "tool_call_id": STRING,
            "conversation_id": STRING,
            "sequence": COUNT,
            "status": enum(OUTBOX_STATUSES),
            "attempts": COUNT,
            "next_attempt_at": TIME,
            "last_error": nullable(STRING),
            "created_at": TIME,
            "delivered_at": nullable(TIME),
            "lease_owner": nullable(STRING),
            "lease_expires_at": nullable(TIME),
        }
    ),
    "DeliveryAttempt": obj(
        {
            "attempt": {"type": "integer", "minimum": 1},
            "relay_id": STRING,
            "started_at": TIME,
            "duration_ms": COUNT,
            "status_code": nullable(INTEGER),
            "error_class": nullable(STRING),
            "response_excerpt": nullable(STRING),
            "outcome": enum(ATTEMPT_OUTCOMES),
        }
    ),
    "OutboxRowDetail": {
        "allOf": [
            ref("OutboxRow"),
            obj({"payload": ref("ToolResultEvent"), "delivery_attempts": array(ref("DeliveryAttempt"))}),
        ]
    },
    "OutboxList": obj({"outbox": array(ref("OutboxRow"))}),
    "OpsOperation": obj(
        {
            "operation_id": UUID,
            "tool": STRING,
            "tool_call_id": STRING,
            "conversation_id": STRING,
            "app_scope": STRING,
            "instance_id": UUID,
            "state": OPERATION_STATE,
            "reason": OPERATION_REASON,
            "activity": nullable(STRING),
            "duration_seconds": INTEGER,
            "started_at": TIME,
            "ends_at": TIME,
            "finalized_at": nullable(TIME),
            "lateness_ms": nullable(INTEGER),
        }
    ),
    "OperationList": obj({"operations": array(ref("OpsOperation"))}),
    "Stats": obj(
        {
            "outbox": obj(
                {
                    "by_status": obj(dict.fromkeys(OUTBOX_STATUSES, COUNT)),
                    "dead": COUNT,
                    "due_now": COUNT,
                    "oldest_pending_age_seconds": nullable({"type": "number", "minimum": 0}),
                }
            ),
            "operations": obj({"by_state": obj(dict.fromkeys(OPERATION_STATES, COUNT)), "focusing": COUNT}),
            "deadline_lateness_ms": obj(
                {
                    "completed": COUNT,
                    "p50": nullable(INTEGER),
                    "p99": nullable(INTEGER),
                    "max": nullable(INTEGER),
                }
            ),
            "attempts_last_hour": obj(
                {"by_outcome": obj(dict.fromkeys(ATTEMPT_OUTCOMES, COUNT)), "total": COUNT}
            ),
            "server_time": TIME,
        }
    ),
    "ToolCallTrace": obj(
        {
            "tool_call_id": STRING,
            "tool_call": nullable(
                obj(
                    {
                        "tool_call_id": STRING,
                        "conversation_id": STRING,
                        "tool": STRING,
                        "status_code": {"type": "integer", "minimum": 200, "maximum": 599},
                        "response": OBJECT,
                        "created_at": TIME,
                    }
                )
            ),
            "operations": array(
                {"allOf": [ref("OpsOperation"), obj({"result": nullable(ref("PomodoroResult"))})]}
            ),
            "outbox": array(ref("OutboxRowDetail")),
        }
    ),
    "Health": obj({"status": const("ok")}),
    "Ready": obj({"status": const("ready"), "migration": STRING}),
    "Unavailable": obj({"status": const("unavailable"), "reason": STRING}),
}

BODY_MODELS: tuple[type[BaseModel], ...] = (
    ToolCallBody,
    ForegroundBody,
    SurfaceEventBody,
    MessageBody,
    AnswerBody,
    StateWrite,
)


@functools.cache
def body_schemas() -> dict[str, Json]:
    """The request bodies' JSON Schemas from their pydantic models; nested models become components.

    Cached: pydantic takes milliseconds per model, and every app (each test's too) needs them.
    """
    schemas: dict[str, Json] = {}
    for model in BODY_MODELS:
        schema = model.model_json_schema(ref_template=REF)
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    return schemas


SECURITY_SCHEMES = {
    "agent": SecurityScheme(type="http", scheme="bearer", description="AGENT_TOKEN: the Agent Tool API."),
    "host": SecurityScheme(type="http", scheme="bearer", description="HOST_TOKEN: the Host API."),
    "hostSession": SecurityScheme(
        type="apiKey",
        name=COOKIE_NAME,
        security_scheme_in="cookie",
        description="The Web Host page's session cookie, in place of HOST_TOKEN on /v1/host/ "
        "(unsafe methods also need Content-Type: application/json).",
    ),
    "operator": SecurityScheme(type="http", scheme="bearer", description="OPERATOR_TOKEN: the ops API."),
    "capability": SecurityScheme(
        type="http",
        scheme="bearer",
        description="An instance capability (POST /v1/host/instances/{instance_id}/capability): the SDK API.",
    ),
}
SECURITY: dict[str, list[dict[str, list[str]]]] = {
    "agent": [{"agent": []}],
    "host": [{"host": []}, {"hostSession": []}],
    "operator": [{"operator": []}],
    "capability": [{"capability": []}],
}

# --- The table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ok:
    """A success answer: a component schema (JSON) or a raw schema with its media type."""

    schema: str | Json
    description: str
    media_type: str = JSON
    headers: Mapping[str, Json] = field(default_factory=dict)


@dataclass(frozen=True)
class Endpoint:
    summary: str
    ok: Mapping[int, Ok]
    #: Error codes by status, beyond the ones the rules in ``_errors`` add.
    errors: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    #: Bearer audience (a key of ``SECURITY``); None for the unauthenticated probes.
    audience: str | None = None
    body: type[BaseModel] | None = None
    #: Schemas of the path parameters (by name); any not named stay strings.
    path: Mapping[str, Json] = field(default_factory=dict)
    query: Mapping[str, Json] = field(default_factory=dict)
    headers: Mapping[str, Json] = field(default_factory=dict)
    description: str | None = None


CONVERSATION = {"conversation_id": ID}
INSTANCE = {"instance_id": UUID}
NO_STORE = {"Cache-Control": {"type": "string", "pattern": "no-store"}}
SSE = (
    "Server-Sent Events: `event` is operation, workspace, message or interaction, `id` its sequence, "
    "`data` the JSON payload. Resume with Last-Event-ID (or ?after=)."
)

ENDPOINTS: dict[tuple[str, str], Endpoint] = {
    # Agent Tool API
    ("GET", "/v1/tools"): Endpoint(
        "The Agent Tools of every manifest", {200: Ok("ToolList", "The tools")}, audience="agent"
    ),
    ("POST", "/v1/tool-calls"): Endpoint(
        "Call a tool; tool_call_id is the idempotency key",
        {
            200: Ok("PomodoroInterruptReceipt", "A direct tool's answer (pomodoro.interrupt)"),
            202: Ok(
                {"oneOf": [ref("PomodoroStartAccepted"), ref("InteractAskAccepted")]},
                "An operation tool accepted the call; its result comes through the outbox",
            ),
        },
        {
            404: ("unknown_tool",),
            409: ("operation_already_focusing", "idempotency_key_reused"),
            422: ("invalid_arguments",),
        },
        audience="agent",
        body=ToolCallBody,
        description="arguments are checked against the tool's input_schema (GET /v1/tools). The same "
        "tool_call_id with the same body replays the first answer; 400, 401, 404, 413 and 422 record "
        "nothing, so the call may be corrected and retried under the same id.",
    ),
    ("GET", "/v1/operations/{operation_id}"): Endpoint(
        "An operation (settled first when its deadline has passed)",
        {200: Ok("Operation", "The operation")},
        {404: ("unknown_operation",)},
        audience="agent",
        path={"operation_id": UUID},
    ),
    # Host API
    ("GET", "/v1/host/conversations/{conversation_id}/workspace"): Endpoint(
        "The conversation's workspace",
        {200: Ok("Workspace", "The workspace (empty, Interact in front, for a new conversation)")},
        {422: ("invalid_request",)},
        audience="host",
        path=CONVERSATION,
    ),
    ("POST", "/v1/host/conversations/{conversation_id}/workspace/foreground"): Endpoint(
        "Bring Interact or an app to the foreground",
        {200: Ok("Workspace", "The workspace after the switch")},
        {404: ("unknown_app",), 409: ("app_not_resumable",)},
        audience="host",
        body=ForegroundBody,
        path=CONVERSATION,
    ),
    ("GET", "/v1/host/conversations/{conversation_id}/messages"): Endpoint(
        "Messages, oldest first: the main conversation, or one sub-session",
        {200: Ok("MessageList", "The messages")},
        {404: ("unknown_sub_session",), 422: ("invalid_request",)},
        audience="host",
        path=CONVERSATION,
        query={"sub_session_id": UUID, "limit": LIMIT},
    ),
    ("POST", "/v1/host/conversations/{conversation_id}/messages"): Endpoint(
        "Post a message to the conversation or to one of its sub-sessions",
        {201: Ok("Message", "The message")},
        {404: ("unknown_sub_session",), 409: ("sub_session_ended",)},
        audience="host",
        body=MessageBody,
        path=CONVERSATION,
    ),
    ("GET", "/v1/host/conversations/{conversation_id}/events"): Endpoint(
        "Projection changes as a Server-Sent Events stream (it never ends)",
        {200: Ok(STRING, SSE, media_type="text/event-stream", headers=NO_STORE)},
        {422: ("invalid_request",)},
        audience="host",
        path=CONVERSATION,
        query={"after": {"type": "string", "pattern": "^[0-9]+$"}},
        headers={"Last-Event-ID": {"type": "string", "pattern": "^[0-9]+$"}},
    ),
    ("POST", "/v1/host/instances/{instance_id}/close"): Endpoint(
        "Close an app instance (cancels its focusing operation); closing twice is a no-op",
        {200: Ok("CloseResult", "The closed instance")},
        {404: ("unknown_instance",)},
        audience="host",
        path=INSTANCE,
    ),
    ("POST", "/v1/host/instances/{instance_id}/surface-events"): Endpoint(
        "Record a surface event; it never changes an operation",
        {200: Ok("SurfaceEventResult", "Recorded")},
        {404: ("unknown_instance",)},
        audience="host",
        body=SurfaceEventBody,
        path=INSTANCE,
    ),
    ("POST", "/v1/host/instances/{instance_id}/capability"): Endpoint(
        "Mint the SDK capability of an instance, for its Bridge only",
        {200: Ok("Capability", "A new capability", headers=NO_STORE)},
        {404: ("unknown_instance",)},
        audience="host",
        path=INSTANCE,
    ),
    ("POST", "/v1/host/interactions/{tool_call_id}/answer"): Endpoint(
        "Answer a pending interaction; answering again returns the first receipt",
        {200: Ok("InteractionReceipt", "The receipt")},
        {404: ("unknown_interaction",), 422: ("invalid_answer",)},
        audience="host",
        body=AnswerBody,
        path={"tool_call_id": ID},
    ),
    # SDK API
    ("GET", "/v1/sdk/context"): Endpoint(
        "The capability's instance, its operation and the server clock",
        {200: Ok("SdkContext", "The context")},
        audience="capability",
    ),
    ("GET", "/v1/sdk/state"): Endpoint(
        "The instance's state snapshot",
        {200: Ok("InstanceState", "The snapshot")},
        {403: ("feature_not_declared",)},
        audience="capability",
    ),
    ("PUT", "/v1/sdk/state"): Endpoint(
        "Compare-and-set the instance's state snapshot",
        {200: Ok("StateRevision", "The new revision")},
        {
            403: ("feature_not_declared",),
            409: ("state_readonly", "revision_conflict"),
            413: ("state_too_large",),
            422: ("state_schema_violation",),
        },
        audience="capability",
        body=StateWrite,
        description="Refusals, checked in this order: 403 feature_not_declared, 422 invalid_request "
        "(expected_revision is a JSON integer written without a fraction: 1.0 is refused), 409 "
        "state_readonly, 413 state_too_large (compact UTF-8 JSON of data over the manifest's max_bytes), "
        "422 state_schema_violation, 409 revision_conflict (with the current revision).",
    ),
    ("POST", "/v1/sdk/navigation/close"): Endpoint(
        "Close the capability's instance (the Host's close)",
        {200: Ok("CloseResult", "The closed instance")},
        audience="capability",
    ),
    # ops API
    ("GET", "/v1/ops/outbox"): Endpoint(
        "Outbox rows, newest first",
        {200: Ok("OutboxList", "The rows")},
        {422: ("invalid_request",)},
        audience="operator",
        query={"status": enum(OUTBOX_STATUSES), "conversation_id": ID, "limit": LIMIT},
    ),
    ("GET", "/v1/ops/outbox/{event_id}"): Endpoint(
        "One outbox row with its payload and delivery attempts",
        {200: Ok("OutboxRowDetail", "The row")},
        {404: ("unknown_event",)},
        audience="operator",
        path={"event_id": UUID},
    ),
    ("GET", "/v1/ops/operations"): Endpoint(
        "Operations, newest first",
        {200: Ok("OperationList", "The operations")},
        {422: ("invalid_request",)},
        audience="operator",
        query={"state": OPERATION_STATE, "conversation_id": ID, "limit": LIMIT},
    ),
    ("GET", "/v1/ops/stats"): Endpoint(
        "Outbox, operations, deadline lateness and delivery attempts in numbers",
        {200: Ok("Stats", "The numbers")},
        audience="operator",
    ),
    ("GET", "/v1/ops/tool-calls/{tool_call_id}"): Endpoint(
        "What happened to one tool call",
        {200: Ok("ToolCallTrace", "Its answer, operations, outbox rows and delivery attempts")},
        {404: ("unknown_tool_call",)},
        audience="operator",
        path={"tool_call_id": ID},
    ),
    # Probes
    ("GET", "/healthz"): Endpoint("The process is up", {200: Ok("Health", "Up")}),
    ("GET", "/readyz"): Endpoint(
        "The database is reachable and migrated to head",
        {
            200: Ok("Ready", "Ready"),
            503: Ok("Unavailable", "Not ready"),
        },
    ),
    ("GET", "/metrics"): Endpoint(
        "Prometheus metrics",
        {200: Ok(STRING, "Prometheus text exposition format", media_type="text/plain")},
    ),
}

ERROR_DESCRIPTIONS = {
    400: "The body is not JSON",
    401: "No bearer token, a wrong one, or one of another audience",
    403: "Refused",
    404: "No such resource",
    409: "Conflict",
    413: "The body is too large",
    422: "The request has the wrong shape",
}


def _errors(path: str, endpoint: Endpoint) -> dict[int, list[str]]:
    errors: dict[int, list[str]] = {}

    def add(status: int, *codes: str) -> None:
        known = errors.setdefault(status, [])
        known.extend(code for code in codes if code not in known)

    if endpoint.audience is not None:
        add(401, "unauthorized")
    if endpoint.body is not None:
        add(400, "malformed_json")
        add(413, "request_too_large")
        add(422, "invalid_request")
    if "{" in path:
        # A path parameter holding "/" (sent as %2F) reaches no route.
        add(404, "not_found")
    for status, codes in endpoint.errors.items():
        add(status, *codes)
    return dict(sorted(errors.items()))


# --- Patching the generated document ---------------------------------------------------------


@dataclass
class JsonSchema(Schema):
    """A JSON Schema dict where Litestar expects its Schema object, rendered as it is."""

    raw: Json = field(default_factory=dict)

    def to_schema(self) -> Json:
        return copy.deepcopy(self.raw)


def _schema(schema: Json) -> Schema:
    return JsonSchema(raw=schema)


def _content(schema: str | Json, media_type: str = JSON) -> dict[str, OpenAPIMediaType]:
    resolved = ref(schema) if isinstance(schema, str) else schema
    return {media_type: OpenAPIMediaType(schema=_schema(resolved))}


def _success(ok: Ok) -> OpenAPIResponse:
    headers: dict[str, OpenAPIHeader | Reference] = {
        name: OpenAPIHeader(schema=_schema(schema), required=True) for name, schema in ok.headers.items()
    }
    return OpenAPIResponse(
        description=ok.description, content=_content(ok.schema, ok.media_type), headers=headers or None
    )


def _failure(status: int, codes: list[str]) -> OpenAPIResponse:
    schema = {"allOf": [ref("Error"), {"properties": {"error": enum(codes)}}]}
    return OpenAPIResponse(
        description=f"{ERROR_DESCRIPTIONS.get(status, 'Error')}: {', '.join(codes)}",
        content=_content(schema),
    )


def _parameters(operation: Operation, endpoint: Endpoint) -> list[Parameter | Reference]:
    parameters: list[Parameter | Reference] = []
    for parameter in operation.parameters or []:
        if isinstance(parameter, Parameter) and parameter.param_in == "path":
            schema = endpoint.path.get(parameter.name)
            if schema is not None:
                parameter.schema = _schema(schema)
            parameters.append(parameter)
    parameters += [
        Parameter(name=name, param_in="query", schema=_schema(schema), required=False)
        for name, schema in endpoint.query.items()
    ]
    parameters += [
        Parameter(name=name, param_in="header", schema=_schema(schema), required=False)
        for name, schema in endpoint.headers.items()
    ]
    return parameters


def _patch(operation: Operation, path: str, endpoint: Endpoint) -> None:
    operation.summary = endpoint.summary
    operation.description = endpoint.description
    operation.tags = [_tag(path)]
    operation.parameters = _parameters(operation, endpoint) or None
    if endpoint.body is not None:
        operation.request_body = RequestBody(content=_content(endpoint.body.__name__), required=True)
    responses = {str(status): _success(ok) for status, ok in endpoint.ok.items()}
    errors = _errors(path, endpoint)
    responses |= {str(status): _failure(status, codes) for status, codes in errors.items()}
    operation.responses = dict(sorted(responses.items()))
    if endpoint.audience is not None:
        operation.security = [dict(requirement) for requirement in SECURITY[endpoint.audience]]


def _tag(path: str) -> str:
    for prefix, tag in (("/v1/host/", "Host API"), ("/v1/sdk/", "SDK API"), ("/v1/ops/", "ops API")):
        if path.startswith(prefix):
            return tag
    return "Agent Tool API" if path.startswith("/v1/") else "Probes"


def document(app: Litestar) -> None:
    """Complete the app's generated OpenAPI document in place from ``ENDPOINTS``."""
    openapi = app.openapi_schema
    schemas = {**RESPONSE_SCHEMAS, **body_schemas()}  # never changed: JsonSchema renders copies
    openapi.components.schemas.update({name: _schema(schema) for name, schema in schemas.items()})
    openapi.components.security_schemes = {
        **(openapi.components.security_schemes or {}),
        **SECURITY_SCHEMES,
    }
    for path, item in (openapi.paths or {}).items():
        for method in ("get", "put", "post", "delete", "patch"):
            operation = getattr(item, method)
            endpoint = ENDPOINTS.get((method.upper(), path))
            if operation is not None and endpoint is not None:
                _patch(operation, path, endpoint)
