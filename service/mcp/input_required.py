"""SEP-2322's ephemeral input rounds (MCP 2026-07-28): a ``tools/call`` answered ``input_required``.

A Tool may declare, in its manifest, ``input_rounds``: what it asks the client before it decides,
round after round, each round a map of keys to requests the client runs itself
(``elicitation/create`` in form mode, ``sampling/createMessage``, ``roots/list``). A call at
2026-07-28 of such a Tool goes:

1. The server answers ``{"resultType": "input_required", "inputRequests": {...}, "requestState"}``
   with the first round's requests that the request's client capabilities
   (``_meta["io.modelcontextprotocol/clientCapabilities"]``) can run: ``elicitation`` (form mode),
   ``sampling``, ``roots``. A request the client cannot run is not asked (its key stays absent).
2. The client calls again, the same tool and arguments, with ``inputResponses`` (by key) and the
   ``requestState``. Responses for keys not outstanding are ignored; one of the wrong shape (not an
   ``ElicitResult``, a ``CreateMessageResult``, a ``ListRootsResult``, or an accepted form whose
   content does not match its ``requestedSchema``) is ``-32602``. A key still missing is asked
   again (a new ``input_required``); a complete round leads to the next.
   A request's params may stand for the call's arguments: each ``{"$argument": name}`` in them
   (outside a form's ``requestedSchema``) is the value of that argument, a string the Tool's input
   schema requires (``with_arguments``; checked when the manifest is loaded).
3. Once no round is left, the one decision is made, as any call's (one transaction, exactly once
   per ``tool_call_id``): every response is passed to the Tool's decision in ``p_context.input``,
   by key. A replay of a decided ``tool_call_id`` answers what was decided, whatever it is given.

The rounds write nothing: what was gathered so far travels in ``requestState``, sealed by the MCP
SDK's ``RequestStateBoundary`` (AES-256-GCM, so authenticated and unreadable to the client) under
``MCP_REQUEST_STATE_SECRET`` (or a key derived from ``HOST_SESSION_SECRET``), shared by every
replica: any replica takes any round. The seal binds the method, the tool, a digest of its arguments,
the conversation the call is bound to and an expiry (``MCP_REQUEST_STATE_TTL_SECONDS``); an edited,
foreign or stale state is ``-32602`` "Invalid or expired requestState", and the call starts over.
Without a key, nothing is asked: the Tool decides without input, as it does over REST or for a
client that declares none of the capabilities its requests need. At 2025-11-25, which has no
``input_required``, the rounds are asked over the session while the call waits
(``InputRounds.ask_over_session``): no state travels, so no key is needed.

A call the engine would refuse anyway (no conversation, arguments that miss the input schema) is
not asked anything: it goes straight to its refusal.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import structlog
from jsonschema import Draft202012Validator
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity, compact_json
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import BaseModel, ValidationError

from service.manifests import Registry
from service.mcp import elicitation
from service.mcp.binding import bind, bound_conversation, person_conversation
from service.settings import Settings, split_tokens

Ctx = ServerRequestContext[Any, Any]
log = structlog.get_logger("service.mcp")

#: The audience sealed into every state: a state of another service sharing the key opens nothing.
AUDIENCE = "lineup-runtime/input-rounds"
_KEY_LABEL = b"lineup mcp request-state key"

#: Each method a round may ask, the client capability it needs, and the result it answers with.
_RESULTS: dict[str, type[BaseModel]] = {
    "elicitation/create": types.ElicitResult,
    "sampling/createMessage": types.CreateMessageResult,
    "roots/list": types.ListRootsResult,
}


def keys(settings: Settings) -> tuple[str, ...]:
    """The state's keys: ``MCP_REQUEST_STATE_SECRET`` (the first seals, each opens), or one derived
    from ``HOST_SESSION_SECRET`` (a separate key: a state is never a session); none: disabled."""
    secrets = split_tokens(settings.mcp_request_state_secret)
    if not secrets and settings.host_session_secret:
        secrets = (hmac.digest(settings.host_session_secret.encode(), _KEY_LABEL, "sha256").hex(),)
    return secrets


def bound_principal(ctx: Ctx) -> str:
    """Who a state belongs to: the conversation the call is bound to (a person's own, or the one the
    Agent names). A request that names none, or names it two ways that disagree, seals and opens
    under a marker of its own; its call is then refused by the binding with its own message."""
    try:
        conversation = bound_conversation((ctx.params or {}).get("_meta"))
    except MCPError:
        conversation = None
    return compact_json([person_conversation.get() is not None, conversation])


def can_run(method: str, capabilities: types.ClientCapabilities | None) -> bool:
    """Whether a client with these capabilities runs ``method`` when asked."""
    if capabilities is None:
        return False
    if method == "elicitation/create":
        return elicitation.elicits(capabilities)
    if method == "sampling/createMessage":
        return capabilities.sampling is not None
    return capabilities.roots is not None  # roots/list


def _invalid(key: str, message: str, details: Any = None) -> MCPError:
    data: dict[str, Any] = {"field": f"inputResponses.{key}"}
    if details is not None:
        data["details"] = details
    return MCPError(INVALID_PARAMS, f"inputResponses[{key!r}] {message}", data=data)


#: A value of a request's params that stands for one of the call's arguments (``{"$argument": name}``).
ARGUMENT = "$argument"


def with_arguments(value: Any, arguments: Mapping[str, Any]) -> Any:
    """``value`` (a round's requests, or one of them) with each ``{"$argument": name}`` replaced by
    that argument of the call: a request built from what the Agent asked (a sampling of the text
    it gave). Loading checked that each names a string argument the input schema requires."""
    if isinstance(value, dict):
        if set(value) == {ARGUMENT}:
            return arguments[value[ARGUMENT]]
        return {key: with_arguments(item, arguments) for key, item in value.items()}
    if isinstance(value, list):
        return [with_arguments(item, arguments) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class Gathered:
    """Either the ``input_required`` result to answer (``asks``), or what the client gave, by key
    (``given``), for the one decision."""

    asks: dict[str, Any] | None = None
    given: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class _State:
    round: int
    given: dict[str, Any]

    def sealed(self) -> str:
        """The plaintext the boundary seals on the way out."""
        return compact_json({"round": self.round, "input": self.given})

    @classmethod
    def opened(cls, plaintext: object) -> _State:
        """The state the boundary opened (it verified it first: only what this server minted)."""
        try:
            state = json.loads(plaintext) if isinstance(plaintext, str) else {}
            return cls(int(state["round"]), dict(state["input"]))
        except (ValueError, KeyError, TypeError):
            raise MCPError(INVALID_PARAMS, "Invalid or expired requestState") from None


class InputRounds:
    """The input rounds of every Tool that declares them, and the seal of their state."""

    def __init__(self, settings: Settings, registry: Registry) -> None:
        secrets = keys(settings)
        self._boundary = (
            RequestStateBoundary(
                RequestStateSecurity(
                    keys=list(secrets),
                    ttl=settings.mcp_request_state_ttl_seconds,
                    bind_principal=bound_principal,
                ),
                default_audience=AUDIENCE,
            )
            if secrets
            else None
        )
        self._rounds = {name: spec.input_rounds for name, spec in registry.tools.items() if spec.input_rounds}
        self._forms = {
            (name, key): Draft202012Validator(request["params"]["requestedSchema"])
            for name, rounds in self._rounds.items()
            for asked in rounds
            for key, request in asked.items()
            if request["method"] == "elicitation/create"
        }
        self._registry = registry
        self._wait = settings.mcp_request_state_ttl_seconds

    async def seal(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        """The middleware that opens an echoed ``requestState`` before the handler and seals an
        ``input_required`` result's after it (the SDK's ``RequestStateBoundary``)."""
        if self._boundary is None:
            return await call_next(ctx)
        return await self._boundary(ctx, call_next)

    def gather(self, ctx: Ctx, params: Mapping[str, Any]) -> Gathered:
        """What this ``tools/call`` (at 2026-07-28) asks the client, or gives the decision."""
        name = params.get("name")
        if not isinstance(name, str) or name not in self._rounds:
            return Gathered()
        rounds = self._rounds[name]
        if self._boundary is None:
            return Gathered(given={})
        bind(params.get("_meta"))  # no conversation: refused as any call, before anything is asked
        spec = self._registry.tools[name]
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict) or spec.validate_arguments(arguments):
            return Gathered(given={})  # the call's checks refuse it, with their details
        responses = params.get("inputResponses")
        if responses is None:
            responses = {}
        if not isinstance(responses, dict):
            raise MCPError(
                INVALID_PARAMS, "inputResponses must be an object", data={"field": "inputResponses"}
            )
        echoed = params.get("requestState")
        state = _State(0, {}) if echoed is None else _State.opened(echoed)
        capabilities = ctx.session.client_capabilities
        given = dict(state.given)
        for number in range(state.round, len(rounds)):
            runnable = {
                key: request
                for key, request in rounds[number].items()
                if can_run(request["method"], capabilities)
            }
            outstanding = {key: request for key, request in runnable.items() if key not in given}
            for key, request in outstanding.items():
                if key in responses:
                    given[key] = self._checked(name, key, request["method"], responses[key])
            missing = {key: request for key, request in outstanding.items() if key not in given}
            if missing:
                return Gathered(asks=self._asks(with_arguments(missing, arguments), _State(number, given)))
            responses = {}  # a later round's keys are answered only once asked
        return Gathered(given=given)

    async def ask_over_session(self, ctx: Ctx, params: Mapping[str, Any]) -> Gathered:
        """What this ``tools/call`` at 2025-11-25 gives the decision: that revision has no
        ``input_required``, so the Tool's rounds are asked over the session, in turn, while the call
        waits — each round's requests at once, those the client's capabilities can run — as
        requests on its standalone stream (as an ``interact.ask`` elicitation is). A request the
        client refuses (an error) or leaves unanswered for ``MCP_REQUEST_STATE_TTL_SECONDS`` is
        not given; an answer of the wrong shape is ``-32602``, and nothing is decided."""
        name = params.get("name")
        if not isinstance(name, str) or name not in self._rounds:
            return Gathered()
        bind(params.get("_meta"))  # no conversation: refused as any call, before anything is asked
        arguments = params.get("arguments")
        if not isinstance(arguments, dict | None) or self._registry.tools[name].validate_arguments(
            arguments or {}
        ):
            return Gathered(given={})  # the call's checks refuse it, with their details
        capabilities = ctx.session.client_capabilities
        given: dict[str, Any] = {}
        for asked in self._rounds[name]:
            runnable = {key: r for key, r in asked.items() if can_run(r["method"], capabilities)}
            answers = await asyncio.gather(
                *(
                    self._request(ctx, with_arguments(request, arguments or {}))
                    for request in runnable.values()
                ),
                return_exceptions=True,
            )
            for (key, request), answer in zip(runnable.items(), answers, strict=True):
                if isinstance(answer, MCPError | TimeoutError):
                    log.info("mcp_input_round_not_given", tool=name, key=key, error=repr(answer))
                    continue
                if isinstance(answer, BaseException):
                    raise answer
                given[key] = self._checked(name, key, request["method"], answer)
        return Gathered(given=given)

    async def _request(self, ctx: Ctx, request: Mapping[str, Any]) -> dict[str, Any]:
        """One request of a round sent to the client; its answer as the wire carries it."""
        method, params = request["method"], request.get("params", {})
        typed: types.ServerRequest
        if method == "elicitation/create":
            typed = types.ElicitRequest(
                params=types.ElicitRequestFormParams.model_validate(params, by_name=False)
            )
        elif method == "sampling/createMessage":
            typed = types.CreateMessageRequest(
                params=types.CreateMessageRequestParams.model_validate(params, by_name=False)
            )
        else:
            typed = types.ListRootsRequest()
        async with asyncio.timeout(self._wait):
            answered = await ctx.session.send_request(typed, _RESULTS[method])
        return answered.model_dump(by_alias=True, mode="json", exclude_none=True)

    @staticmethod
    def _asks(requests: Mapping[str, Mapping[str, Any]], state: _State) -> dict[str, Any]:
        return {
            "resultType": "input_required",
            "inputRequests": {key: dict(request) for key, request in requests.items()},
            "requestState": state.sealed(),
        }

    def _checked(self, tool: str, key: str, method: str, response: object) -> dict[str, Any]:
        """A response of the shape its request's method answers; an accepted form's content held
        to its ``requestedSchema``. As given (JSON), for the decision."""
        if not isinstance(response, dict):
            raise _invalid(key, f"must be the result of {method} (an object)")
        try:
            _RESULTS[method].model_validate(response, by_name=False)
        except ValidationError as error:
            details = [
                {"path": ".".join(str(part) for part in item["loc"]), "message": item["msg"]}
                for item in error.errors(include_url=False, include_context=False, include_input=False)
            ]
            raise _invalid(key, f"is not a result of {method}", details) from None
        if method == "elicitation/create" and response.get("action") == "accept":
            form = self._forms[(tool, key)]
            errors = sorted(form.iter_errors(response.get("content", {})), key=lambda e: list(e.path))
            if errors:
                details = [
                    {"path": ".".join(str(part) for part in error.absolute_path), "message": error.message}
                    for error in errors
                ]
                raise _invalid(key, "content does not match the form's requestedSchema", details)
        return response
