"""The outcome of a tool call: the word its answer carries (``status``, or ``error`` for a refusal),
as the database's decision functions answer it, and the kind of answer each one is.

The database and the use cases speak outcomes; ``service.api.errors`` alone turns a kind into an
HTTP status, for REST and MCP alike.
"""

from __future__ import annotations

from enum import StrEnum

from service.domain.errors import Conflict


class Accepted:
    """An operation was opened; its result comes later, through the outbox."""


class Answered:
    """The answer is complete now."""


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    INTERRUPTED = "interrupted"
    OPERATION_ALREADY_FINAL = "operation_already_final"
    NO_ACTIVE_FOCUSING_OPERATION = "no_active_focusing_operation"
    OPERATION_ALREADY_FOCUSING = "operation_already_focusing"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"


KIND_OF_OUTCOME: dict[Outcome, type] = {
    Outcome.ACCEPTED: Accepted,
    Outcome.INTERRUPTED: Answered,
    Outcome.OPERATION_ALREADY_FINAL: Answered,
    Outcome.NO_ACTIVE_FOCUSING_OPERATION: Answered,
    Outcome.OPERATION_ALREADY_FOCUSING: Conflict,
    Outcome.IDEMPOTENCY_KEY_REUSED: Conflict,
}
