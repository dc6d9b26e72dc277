"""Schemathesis against ``python -m service serve``: every documented operation, with its own token.

The service's own document (``/schema/openapi.json``) drives the run, and every response is checked
against it: no server error, a documented status, the documented content type, headers and body.
Cases come from three strategies per operation: valid and invalid requests from the document as
served, and valid requests from a copy narrowed to what exists — the tools with their argument
schemas, Pomodoro's state schema, seeded conversations, instances and interactions — so that the
fuzzer reaches the decisions and not only the 404s.

The service runs a test-only app besides the shipped ones (APP_FOLDERS: tests/fixtures/
lookalike_app/), whose answers have exactly the Pomodoro's words and shapes: the document holds, and
tells their answers apart, by Tool (service/api/document.py).

Seeded (``derandomize``) and bounded for CI. To hunt for bugs locally, raise the budget and let
every run draw new cases:
``OPENAPI_FUZZ_EXAMPLES=1000 OPENAPI_FUZZ_RANDOM=1 pytest tests/integration/test_openapi_fuzz.py``.
"""

from __future__ import annotations

import asyncio
import copy
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import AsyncTestClient
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.schemas import BaseSchema
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from harness.database import DatabaseFactory
from service.app import create_app
from service.manifests import Registry
from tests.conftest import (
    AGENT,
    AGENT_TOKEN,
    HOST,
    HOST_TOKEN,
    OPERATOR,
    OPERATOR_TOKEN,
    ServiceProcess,
    make_settings,
    registry_with,
    service_on_own_database,
)

Json = dict[str, Any]
MAX_EXAMPLES = int(os.environ.get("OPENAPI_FUZZ_EXAMPLES", "25"))
DERANDOMIZE = not os.environ.get("OPENAPI_FUZZ_RANDOM")
REJECTIONS = ["400", "401", "403", "404", "409", "413", "422", "5xx"]
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
    ignored_auth,
]


#: A test-only app whose answers look exactly like the Pomodoro's.
LOOKALIKE = Path(__file__).resolve().parents[1] / "fixtures" / "lookalike_app"
REGISTRY = registry_with(LOOKALIKE)


def _documented_operations() -> list[str]:
    """Every operation of the document the service generates (no database needed to make it)."""
    registry = REGISTRY
    app = create_app(make_settings("postgresql://nobody@127.0.0.1:1/none"), registry, sweeper=False)
    paths = app.openapi_schema.to_schema()["paths"]
    # The event stream never ends: it is documented, not fuzzed.
    return sorted(
        f"{m.upper()} {path}" for path, item in paths.items() for m in item if not path.endswith("/events")
    )


OPERATIONS = _documented_operations()
# Conversations and tool_call_ids the narrowed cases share, so that repeats (replays, conflicts,
# a second start while one is focusing, interrupts) happen.
CONVERSATIONS = ["fuzz-a", "fuzz-b", "seed-host"]
FUZZ_CALL_ID: Json = {"type": "string", "pattern": "^fuzz-[0-9a-f]{1,2}$"}


@dataclass(frozen=True)
class Seed:
    """What exists before the fuzzing starts."""

    instance_ids: list[str]
    sub_session_ids: list[str]
    interaction_ids: list[str]
    operation_ids: list[str]
    event_ids: list[str]
    tool_call_ids: list[str]
    #: The SDK's instances: no case can name them, so only the SDK cases change them.
    capability: str
    close_capability: str


def _call(client: httpx.Client, method: str, path: str, headers: dict[str, str], body: Any = None) -> Json:
    response = client.request(method, path, headers=headers, json=body)
    assert response.status_code < 300, (method, path, response.status_code, response.text)
    return dict(response.json())


def _tool(client: httpx.Client, call_id: str, conversation_id: str, tool: str, arguments: Json) -> Json:
    body = {"tool_call_id": call_id, "conversation_id": conversation_id, "tool": tool, "arguments": arguments}
    return _call(client, "POST", "/v1/tool-calls", AGENT, body)


def _start(client: httpx.Client, conversation_id: str) -> Json:
    arguments = {"duration_seconds": 14400, "activity": "fuzzing"}
    return _tool(client, f"{conversation_id}-start", conversation_id, "pomodoro.start", arguments)


def _capability(client: httpx.Client, instance_id: str) -> str:
    return str(_call(client, "POST", f"/v1/host/instances/{instance_id}/capability", HOST)["capability"])


def seed(base_url: str) -> Seed:
    with httpx.Client(base_url=base_url, timeout=10) as client:
        sdk, closing = _start(client, "seed-sdk"), _start(client, "seed-close")
        host, done = _start(client, "seed-host"), _start(client, "seed-done")
        _tool(client, "seed-done-stop", "seed-done", "pomodoro.interrupt", {})
        _tool(client, "seed-ask", "seed-host", "interact.ask", {"prompt": "?"})
        _tool(client, "seed-pick", "seed-host", "interact.ask", {"prompt": "?", "choices": ["yes", "no"]})
        board = _call(
            client,
            "POST",
            "/v1/host/conversations/seed-board/workspace/foreground",
            HOST,
            {"target": {"app_scope": "whiteboard"}},
        )
        outbox = _call(client, "GET", "/v1/ops/outbox", OPERATOR)
        return Seed(
            instance_ids=[host["instance_id"], done["instance_id"], board["foreground"]["instance_id"]],
            sub_session_ids=[host["sub_session_id"], done["sub_session_id"]],
            interaction_ids=["seed-ask", "seed-pick"],
            operation_ids=[host["operation"]["operation_id"], done["operation"]["operation_id"]],
            event_ids=[row["event_id"] for row in outbox["outbox"]],
            tool_call_ids=["seed-host-start", "seed-done-start", "seed-done-stop", "seed-ask"],
            capability=_capability(client, sdk["instance_id"]),
            close_capability=_capability(client, closing["instance_id"]),
        )


def narrow(document: Json, seed: Seed, registry: Registry) -> Json:
    """A copy of the document whose requests name what exists; its responses are left as they are.

    Valid requests of the copy are valid requests of the document, so only positive cases come
    from it (a negative case of the copy could be a valid request).
    """
    narrowed = copy.deepcopy(document)
    known = {
        "conversation_id": CONVERSATIONS,
        "instance_id": seed.instance_ids,
        "sub_session_id": seed.sub_session_ids,
        "operation_id": seed.operation_ids,
        "event_id": seed.event_ids,
    }
    for path, item in narrowed["paths"].items():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                values = known.get(parameter["name"])
                if parameter["name"] == "tool_call_id":
                    values = seed.interaction_ids if "/interactions/" in path else seed.tool_call_ids
                if values:
                    parameter["schema"] = {"enum": values}
    schemas = narrowed["components"]["schemas"]
    for tool in registry.tools.values():  # each Tool's call (service/api/document.py)
        schemas[f"ToolCall.{tool.name}"]["properties"] = {
            "tool_call_id": FUZZ_CALL_ID,
            "conversation_id": {"enum": CONVERSATIONS},
            "tool": {"const": tool.name},
            "arguments": tool.input_schema,
        }
    pomodoro = registry.app("pomodoro")
    assert pomodoro is not None and pomodoro.instance_state is not None
    state = schemas["StateWrite"]["properties"]
    state["data"] = pomodoro.instance_state.state_schema
    state["expected_revision"] = {"type": "integer", "minimum": 0, "maximum": 3}
    schemas["MessageBody"]["properties"]["sub_session_id"] = {"enum": [*seed.sub_session_ids, None]}
    schemas["AnswerBody"]["properties"]["answer"] = {"enum": ["yes", "no", "maybe"]}
    schemas["AppTarget"]["properties"]["app_scope"] = {"enum": sorted(registry.apps)}
    return narrowed


def unhandled_errors(log: str) -> list[str]:
    return [line for line in log.splitlines() if "unhandled_error" in line or "Traceback" in line]


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """One service and one database for every operation: the state they build up is fuzzed too."""
    with service_on_own_database(
        database_factory, tmp_path_factory.mktemp("fuzz"), APP_FOLDERS=str(LOOKALIKE)
    ) as process:
        yield process


@pytest.fixture
def no_unhandled_errors(service: ServiceProcess) -> Iterator[None]:
    """A server error the checks cannot see (one inside a stream, say) still shows in the log."""
    before = len(service.log.read_text(errors="replace"))
    yield
    errors = unhandled_errors(service.log.read_text(errors="replace")[before:])
    assert not errors, "the service logged unhandled errors:\n" + "\n".join(errors[:20])


@pytest.fixture(scope="module")
def seeded(service: ServiceProcess) -> Seed:
    return seed(service.base_url)


@pytest.fixture(scope="module")
def schemas(service: ServiceProcess, seeded: Seed) -> tuple[BaseSchema, BaseSchema]:
    """The served document and its narrowed copy, each with the token of every audience."""
    document = httpx.get(f"{service.base_url}/schema/openapi.json", timeout=10).json()
    config = schemathesis.Config.from_dict(
        {
            "base-url": service.base_url,
            "request-timeout": 10,
            # Requests without a token, or a wrong one, are the ignored_auth check's job.
            "generation": {"with-security-parameters": False},
            # How this service refuses a request (a body over the size limit with 413); a 5xx is
            # not_a_server_error's to report.
            "checks": {"negative_data_rejection": {"expected-statuses": REJECTIONS}},
            "auth": {
                "openapi": {
                    "agent": {"bearer": AGENT_TOKEN},
                    "host": {"bearer": HOST_TOKEN},
                    "operator": {"bearer": OPERATOR_TOKEN},
                    "capability": {"bearer": seeded.capability},
                }
            },
        }
    )
    served = schemathesis.openapi.from_dict(document, config=config)
    narrowed = schemathesis.openapi.from_dict(narrow(document, seeded, REGISTRY), config=config)
    return served, narrowed


@pytest.mark.usefixtures("no_unhandled_errors")
@pytest.mark.parametrize("label", OPERATIONS)
def test_operation_answers_as_documented(
    label: str, schemas: tuple[BaseSchema, BaseSchema], seeded: Seed
) -> None:
    served, narrowed = (schema.find_operation_by_label(label) for schema in schemas)
    assert served is not None and narrowed is not None, f"{label} is not in the served document"
    headers = None
    if label == "POST /v1/sdk/navigation/close":
        # Its own instance, so that closing it leaves the state of the other SDK cases writable.
        headers = {"Authorization": f"Bearer {seeded.close_capability}"}

    @given(
        case=st.one_of(
            served.as_strategy(GenerationMode.POSITIVE),
            served.as_strategy(GenerationMode.NEGATIVE),
            narrowed.as_strategy(GenerationMode.POSITIVE),
        )
    )
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=DERANDOMIZE,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    def answers_as_documented(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(headers=headers, checks=CHECKS)

    answers_as_documented()


TWINS = {
    "pomodoro.start": "lookalike.start",
    "lookalike.start": "pomodoro.start",
    "pomodoro.interrupt": "lookalike.interrupt",
    "lookalike.interrupt": "pomodoro.interrupt",
}


def _valid(document: Json, ref: str, body: Json) -> bool:
    schema = {**document, "$ref": ref}  # its refs resolve against the whole document
    return jsonschema.Draft202012Validator(schema).is_valid(body)


def test_each_tools_answers_are_told_apart_by_the_tool(service: ServiceProcess, seeded: Seed) -> None:
    """The lookalike's answers fit the Pomodoro's types as well as its own (which is why a ``oneOf``
    of every app's answers cannot hold); the document selects each answer's schema by the Tool
    called, and names exactly the Tools the service runs."""
    document = httpx.get(f"{service.base_url}/schema/openapi.json", timeout=10).json()
    operation = document["paths"]["/v1/tool-calls"]["post"]
    by_tool = operation["x-answers-by-tool"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert sorted(by_tool) == sorted(body["discriminator"]["mapping"]) == sorted(REGISTRY.tools)
    with httpx.Client(base_url=service.base_url, timeout=10) as client:
        listed = _call(client, "GET", "/v1/tools", AGENT)["tools"]
        assert sorted(tool["name"] for tool in listed) == sorted(REGISTRY.tools)
        answers = {
            ("pomodoro.start", "202"): _start(client, "told-apart"),
            ("lookalike.start", "202"): _tool(
                client, "told-apart-look", "told-apart", "lookalike.start", {"duration_seconds": 60}
            ),
            ("pomodoro.interrupt", "200"): _tool(
                client, "told-apart-stop", "told-apart", "pomodoro.interrupt", {}
            ),
            ("lookalike.interrupt", "200"): _tool(
                client, "told-apart-look-stop", "told-apart-final", "lookalike.interrupt", {}
            ),
        }
    for (tool, status), answer in answers.items():
        own = by_tool[tool][status]
        twin = by_tool[TWINS[tool]][status]
        assert _valid(document, own, answer), (tool, answer)
        assert _valid(document, twin, answer), (tool, "looks like its twin's", answer)
        assert _valid(
            document,
            f"#/paths/~1v1~1tool-calls/post/responses/{status}/content/application~1json/schema",
            answer,
        )


# Inputs schemathesis does not generate (it never puts U+0000 or "/" in a path parameter, nor a
# non-ASCII digit in an integer): each of these answered 500 before it was fixed.


async def test_an_answer_to_an_interaction_id_holding_nul_is_404(client: AsyncTestClient[Any]) -> None:
    response = await client.post("/v1/host/interactions/a%00b/answer", json={"answer": "x"}, headers=HOST)
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_interaction"


async def test_a_message_limit_in_non_ascii_digits_is_422(client: AsyncTestClient[Any]) -> None:
    response = await client.get("/v1/host/conversations/c/messages?limit=%C2%B2", headers=HOST)
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_request"


@pytest.mark.parametrize(
    "path", ["/v1/host/conversations/c/events?after=%C2%B2", "/v1/host/conversations/a%00b/events"]
)
async def test_a_bad_event_stream_request_is_422(client: AsyncTestClient[Any], path: str) -> None:
    async with asyncio.timeout(10), client.stream("GET", path, headers=HOST) as response:
        assert response.status_code == 422
