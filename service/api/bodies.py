"""Request bodies: one model per body, and the request class that reads them with the contract's
errors.

Handlers declare ``data: SomeBody``; Litestar documents the model and hands the handler a validated
instance. ``ContractRequest.json`` is where Litestar reads a JSON body: it answers a body that is
not JSON with ``400 malformed_json``, a U+0000 anywhere with ``422``, and a body that does not fit
the handler's model with ``422 invalid_request`` listing every problem — where Litestar itself
would answer ``400`` with its own shapes.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, TypeVar
from uuid import UUID

import msgspec
from litestar import Request
from litestar.exceptions import ClientException, InternalServerException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.types import Empty
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails

from service.domain.errors import InvalidRequest, Malformed
from service.domain.ids import ID_PATTERN, ID_RULE, MAX_ID_LENGTH
from service.domain.text import nul_paths

ModelT = TypeVar("ModelT", bound=BaseModel)

# A new caller-made id: the rule of ``service.domain.ids`` as a pattern (so the document states it),
# its refusal worded as the rule.
Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]
# Litestar documents a list's items without their pattern: a list of ids says it itself.
ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": MAX_ID_LENGTH, "pattern": ID_PATTERN}
Scope = Annotated[str, StringConstraints(min_length=1, max_length=64)]
# Revisions are Postgres bigints.
MAX_REVISION = 2**63 - 1


class StrictBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ToolCallBody(StrictBody):
    tool_call_id: Id
    conversation_id: Id
    tool: Annotated[str, StringConstraints(min_length=1, max_length=255)]
    arguments: dict[str, Any]


class AppTarget(StrictBody):
    app_scope: Scope


class ForegroundBody(StrictBody):
    target: Literal["interact"] | AppTarget


class SurfaceEventBody(StrictBody):
    event: Literal["dimmed", "undimmed", "locked", "unlocked", "reloaded"]


class MessageBody(StrictBody):
    role: Literal["user", "agent"]
    text: Annotated[str, StringConstraints(min_length=1, max_length=8000)]
    sub_session_id: Annotated[UUID, Field(strict=False)] | None = None


class AnswerBody(StrictBody):
    answer: Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class FormsAnswerBody(StrictBody):
    # The answers to an app's forms: each form's key -> its content (checked against the form).
    answers: Annotated[dict[str, dict[str, Any]], Field(min_length=1, max_length=10)]


class SessionRequest(StrictBody):
    subject: Annotated[str, StringConstraints(min_length=1, max_length=255)]
    conversation_ids: Annotated[
        list[Id], Field(min_length=1, max_length=1000, json_schema_extra={"items": ID_SCHEMA})
    ]
    ttl_seconds: Annotated[int, Field(ge=60, le=86400)] = 3600


class StateWrite(StrictBody):
    expected_revision: Annotated[int, Field(ge=0, le=MAX_REVISION)]
    data: dict[str, Any]


class PauseBody(StrictBody):
    reason: Annotated[str, StringConstraints(min_length=1, max_length=500)] | None = None


# RFC 3339 with an offset (a time without one names no instant).
Instant = Annotated[AwareDatetime, Field(strict=False)]


class RecoverBody(StrictBody):
    """Which dead rows to requeue: created in [since, until), of one conversation, of one tool,
    whose last error begins with a prefix; nothing set: every dead row."""

    since: Instant | None = None
    until: Instant | None = None
    # A filter reaches ids recorded under the earlier id rule too (service.domain.ids).
    conversation_id: Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH)] | None = None
    tool: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None = None
    last_error_prefix: Annotated[str, StringConstraints(min_length=1, max_length=500)] | None = None
    dry_run: bool = False

    @model_validator(mode="after")
    def _since_before_until(self) -> RecoverBody:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be before until")
        return self


def _path(location: tuple[int | str, ...]) -> str:
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "$"


def parse_json(raw: bytes) -> Any:
    """Decode a body; not JSON → 400 ``malformed_json``; a U+0000 in any string → 422."""
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise Malformed(f"the request body is not JSON: {exc}") from None
    except RecursionError:
        raise Malformed("the request body is nested too deeply") from None
    # find(), not ``in``: bytes.__contains__ first tries its operand as an integer, and the
    # TypeError it builds and drops costs more than the search (on every tool call).
    if raw.find(b"\\u0000") >= 0:
        try:
            paths = nul_paths(data)
        except RecursionError:
            raise Malformed("the request body is nested too deeply") from None
        if paths:
            raise InvalidRequest(
                "strings may not contain U+0000",
                details=[{"path": p, "message": "contains U+0000"} for p in paths],
            )
    return data


def _message(error: ErrorDetails) -> str:
    if error["type"] == "string_pattern_mismatch" and error.get("ctx", {}).get("pattern") == ID_PATTERN:
        return ID_RULE
    return error["msg"]


def validate(model: type[ModelT], data: Any) -> ModelT:
    """Check a decoded body against its model; unknown fields and wrong types → 422."""
    if not isinstance(data, dict):
        raise InvalidRequest(
            "the request body must be a JSON object",
            details=[{"path": "$", "message": "must be an object"}],
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = [{"path": _path(error["loc"]), "message": _message(error)} for error in exc.errors()]
        raise InvalidRequest("the request body has the wrong shape", details=details) from None


class ContractRequest(Request[Any, Any, Any]):
    """The service's request class: JSON bodies are read, and checked against the handler's body
    model, with the contract's errors (Litestar reads ``data`` through ``json()``, which answers
    the checked model for a handler that takes one, the decoded JSON otherwise)."""

    @property
    def content_length(self) -> int | None:
        """Litestar's ``content_length`` (its check of the body's size reads it), read from the
        scope's raw headers: reading a body no longer builds the request's header mapping."""
        cached = self._content_length
        if cached is not Empty:
            return cached
        for name, header in self.scope["headers"]:  # noqa: B007 - the one found is used below
            # The length first: a name of another length is not lowered (ASGI servers send them
            # lowered already; any case is still found).
            if len(name) == 14 and name.lower() == b"content-length":
                break
        else:
            self._content_length = None
            return None
        try:
            length = self._content_length = int(header)
        except ValueError:
            raise ClientException(f"Invalid content-length: {header.decode('latin-1')!r}") from None
        return length

    async def body(self) -> bytes:
        """Litestar's ``body()``: the same checks (the announced and the received size against the
        route's limit, a disconnect, a body read once), read in a loop instead of through
        ``stream()``'s async generator and a list of its chunks — on every call's path."""
        body = self._body
        if body is Empty:
            body = self._connection_state.body
            if body is Empty:
                body = self._connection_state.body = await self._read_body()
            self._body = body
        return body

    async def _read_body(self) -> bytes:
        if not self.is_connected:
            raise InternalServerException("stream consumed")
        limit = self.route_handler.resolve_request_max_body_size() or math.inf
        announced = self.content_length
        if announced is not None and announced > limit:
            raise RequestEntityTooLarge
        chunks: list[bytes] = []
        received = 0
        while event := await self.receive():
            if event["type"] == "http.request":
                chunk = event["body"]
                if chunk:
                    received += len(chunk)
                    if received > limit:
                        raise RequestEntityTooLarge
                    chunks.append(chunk)
                if not event.get("more_body", False):
                    break
            if event["type"] == "http.disconnect":
                raise InternalServerException("client disconnected prematurely")
        self.is_connected = False
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    # What json() answered, once read (a class attribute until then: looking up a missing instance
    # attribute with a default builds an AttributeError and drops it).
    _contract_json: Any = None

    async def json(self) -> Any:
        if self._contract_json is None:
            data = parse_json(await self.body())
            field = self.route_handler.parsed_fn_signature.parameters.get("data")
            model = field.annotation if field is not None else None
            if isinstance(model, type) and issubclass(model, BaseModel):
                # The checked model itself: Litestar hands an instance of the handler's type on
                # as it is, instead of validating the body a second time.
                data = validate(model, data)
            self._contract_json = data
        return self._contract_json
