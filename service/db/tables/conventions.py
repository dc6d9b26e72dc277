"""What every table shares: the metadata and its naming convention, the domain's words the checks
list, and the column helpers."""

from __future__ import annotations

from sqlalchemy import Column, DateTime, MetaData, text

from service.domain.delivery import Circuit
from service.domain.operations import Reason, State
from service.domain.outbox import AttemptOutcome, OutboxStatus

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

NOW = text("now()")
# The domain's words, in the order the checks list them.
OPERATION_STATES = tuple(state.value for state in State)
OPERATION_REASONS = tuple(reason.value for reason in Reason)
OUTBOX_STATUSES = tuple(status.value for status in OutboxStatus)
ATTEMPT_OUTCOMES = tuple(outcome.value for outcome in AttemptOutcome)
CIRCUIT_STATES = tuple(state.value for state in Circuit)


def one_of(column: str, values: tuple[str, ...]) -> str:
    """A check's text: ``column`` holds one of ``values``."""
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def any_of(column: str, values: tuple[str, ...]) -> str:
    """A check's text: ``column`` holds one of ``values`` (plain words), as ``one_of`` but stored as
    one array constant instead of an array of constants: Postgres reads a table's checks back and
    prepares them at every statement that writes it, and this form is the shorter to read and needs
    no folding (for the tables a tool call writes; migration 0020)."""
    return f"{column} = ANY ('{{{','.join(values)}}}'::text[])"


def timestamp(name: str, *, nullable: bool = False, default: bool = False) -> Column[object]:
    """A ``timestamptz`` column, ``now()`` by default when ``default``."""
    return Column(name, DateTime(timezone=True), nullable=nullable, server_default=NOW if default else None)
