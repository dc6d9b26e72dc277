"""The scalar types of documented answers: formats, non-negative counts, and the domain's words as
``Literal`` types (what an OpenAPI document can show). Shared by the REST API's answers
(``service.api.answers``) and the Tools' answers (``service.apps.*.answers``)."""

from typing import Annotated, Any, Literal

from litestar.openapi.spec import OpenAPIFormat
from litestar.params import KwargDefinition

from service.domain.operations import Reason, State
from service.domain.outbox import AttemptOutcome as DomainAttemptOutcome
from service.domain.outbox import OutboxStatus as DomainOutboxStatus

Uuid = Annotated[str, KwargDefinition(format=OpenAPIFormat.UUID)]
Time = Annotated[str, KwargDefinition(format=OpenAPIFormat.DATE_TIME)]


class SchemaKeywords(dict[str, Any]):
    """Schema keywords for ``KwargDefinition(schema_extra=...)`` that can sit in a union: typing
    hashes the metadata of ``Annotated[...] | None``."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


# (ge=0 would be dropped from the document as a falsy value.)
Count = Annotated[int, KwargDefinition(schema_extra=SchemaKeywords(minimum=0))]

OperationState = Literal["focusing", "completed", "interrupted", "cancelled", "failed"]
FinalState = Literal["completed", "interrupted", "cancelled", "failed"]
OperationReason = Literal[
    "deadline_reached",
    "agent_interrupt",
    "person_interrupt",
    "user_left_workspace",
    "app_closed",
    "app_failed",
]
OutboxStatus = Literal["pending", "delivered", "dead"]
AttemptOutcome = Literal["delivered", "retry", "dead", "lease_lost"]
# The same words as the domain's enums (Literal types are what the document can show).
assert set(OperationState.__args__) == {s.value for s in State}  # type: ignore[attr-defined]
assert set(OperationReason.__args__) == {r.value for r in Reason}  # type: ignore[attr-defined]
assert set(OutboxStatus.__args__) == {s.value for s in DomainOutboxStatus}  # type: ignore[attr-defined]
assert set(AttemptOutcome.__args__) == {o.value for o in DomainAttemptOutcome}  # type: ignore[attr-defined]
