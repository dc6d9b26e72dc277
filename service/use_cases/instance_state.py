"""app.instance-state.v1: one schema- and revision-controlled snapshot per instance.

The snapshot is display data for the UI and for history; it never decides anything (no Tool
result, no outbox row, no focus change). Once its instance closes it is read-only history
(``retain_readonly``) or gone (``delete_on_close``), and every write is refused.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg import AsyncConnection
from psycopg import errors as pg_errors
from psycopg.rows import DictRow

from service.app_manifest import INSTANCE_STATE_FEATURE, InstanceStateFeature
from service.db import states as states_db
from service.db import workspaces as ws_db
from service.domain.errors import (
    FeatureNotDeclared,
    Refusal,
    RevisionConflict,
    StateReadonly,
    StateSchemaViolation,
    StateTooLarge,
)
from service.use_cases.capabilities import Capability
from service.use_cases.overdue import settle_overdue
from service.use_cases.runtime import Runtime
from service.use_cases.unit_of_work import UnitOfWork

Conn = AsyncConnection[DictRow]

# Raised by the database trigger that keeps a read-only snapshot unchanged.
READONLY_CONSTRAINT = "instance_state_readonly"


def declared_feature(rt: Runtime, capability: Capability) -> InstanceStateFeature:
    """The app's instance-state feature; 403 ``feature_not_declared`` when its manifest lacks it."""
    app = rt.registry.app(capability.app_scope)
    feature = app.instance_state if app is not None else None
    if feature is None:
        raise FeatureNotDeclared(
            f"the {capability.app_scope} manifest does not declare {INSTANCE_STATE_FEATURE}"
        )
    return feature


def compact_size(data: dict[str, Any]) -> int:
    """Bytes of the canonical form: compact JSON (no spaces), UTF-8, non-ASCII not escaped."""
    return len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def _content_error(feature: InstanceStateFeature, data: dict[str, Any]) -> Refusal | None:
    size = compact_size(data)
    if size > feature.max_bytes:
        return StateTooLarge(
            f"the state is {size} bytes as compact UTF-8 JSON, over max_bytes {feature.max_bytes}",
            size_bytes=size,
            max_bytes=feature.max_bytes,
        )
    details = feature.validate_state(data, prefix="data")
    if details:
        return StateSchemaViolation(
            f"data does not match state_schema version {feature.state_schema_version}",
            details=[d.as_dict() for d in details],
        )
    return None


def _writable(row: DictRow) -> bool:
    return row["status"] == "open" and row["revision"] is not None and not row["readonly"]


async def _snapshot(work: UnitOfWork, capability: Capability) -> DictRow:
    conn = work.conn
    row = await states_db.snapshot(conn, capability.instance_id, capability.conversation_id)
    assert row is not None  # a capability references its instance (foreign key)
    if row["overdue_operation_id"] is not None:
        # Its deadline has passed: settling closes the instance and freezes the snapshot first.
        await ws_db.lock_existing(conn, capability.conversation_id)
        await settle_overdue(work, capability.conversation_id)
        row = await states_db.snapshot(conn, capability.instance_id, capability.conversation_id)
        assert row is not None
    return row


async def get_state(rt: Runtime, capability: Capability) -> dict[str, Any]:
    feature = declared_feature(rt, capability)
    async with rt.unit_of_work() as work:
        row = await _snapshot(work, capability)
    if row["revision"] is None:
        # No snapshot: deleted at close (delete_on_close), or never made (the instance opened
        # before its manifest declared the feature). Either way there is nothing to write to.
        answer: dict[str, Any] = {
            "schema_version": feature.state_schema_version,
            "revision": 0,
            "data": {},
            "readonly": True,
        }
        if row["status"] == "closed":
            answer["deleted"] = True
        return answer
    return {
        "schema_version": row["schema_version"],
        "revision": row["revision"],
        "data": row["data"],
        "readonly": not _writable(row),
    }


async def _write(
    work: UnitOfWork,
    capability: Capability,
    expected_revision: int,
    data: dict[str, Any],
    content_error: Refusal | None,
) -> int | Refusal:
    conn = work.conn
    row = await _snapshot(work, capability)
    if not _writable(row):
        return StateReadonly()
    if content_error is not None:
        return content_error
    revision = await states_db.write(
        conn, capability.instance_id, capability.conversation_id, expected_revision, data
    )
    if revision is not None:
        return revision
    # The compare-and-set lost: to a close that froze or deleted the snapshot, or to a revision.
    current = await states_db.snapshot(conn, capability.instance_id, capability.conversation_id)
    if current is None or not _writable(current):
        return StateReadonly()
    return RevisionConflict(
        f"expected revision {expected_revision}, the state is at revision {current['revision']}",
        revision=current["revision"],
    )


async def put_state(
    rt: Runtime, capability: Capability, expected_revision: int, data: dict[str, Any]
) -> dict[str, int]:
    """Compare-and-set the snapshot. Errors in the contract's order: feature_not_declared,
    (invalid_request: the caller's parse), state_readonly, state_too_large,
    state_schema_violation, revision_conflict."""
    feature = declared_feature(rt, capability)
    # The content checks need no database; they run before the transaction and are answered only
    # after the read-only check, which the contract puts first.
    content_error = _content_error(feature, data)
    try:
        async with rt.unit_of_work() as work:
            # Refusals are returned, not raised, so that a deadline settled on the way commits.
            outcome = await _write(work, capability, expected_revision, data, content_error)
    except pg_errors.CheckViolation as exc:
        if exc.diag.constraint_name != READONLY_CONSTRAINT:
            raise
        raise StateReadonly() from None
    if isinstance(outcome, Refusal):
        raise outcome
    return {"revision": outcome}
