"""The outbox's vocabulary: the status of a row and the outcome of one delivery attempt."""

from __future__ import annotations

from enum import StrEnum


class OutboxStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    DEAD = "dead"


class AttemptOutcome(StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"
    DEAD = "dead"
    LEASE_LOST = "lease_lost"
