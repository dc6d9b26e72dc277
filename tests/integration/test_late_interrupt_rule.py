"""The late-interrupt rule (SQL ``late_interrupt_status``): which receipt an interrupt gets when
nothing is focusing any more."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from service.domain.operations import InterruptStatus

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=300)


@pytest.mark.parametrize(
    ("state", "finalized_offset", "now_offset", "expected"),
    [
        ("interrupted", -10, 0, InterruptStatus.ALREADY_FINAL),
        ("interrupted", -10, 290, InterruptStatus.ALREADY_FINAL),
        ("interrupted", -10, 291, InterruptStatus.NO_ACTIVE),
        ("completed", 900, 300, InterruptStatus.ALREADY_FINAL),  # settled late: the deadline counts
        ("completed", 0, 301, InterruptStatus.NO_ACTIVE),
        ("cancelled", -1, 0, InterruptStatus.ALREADY_FINAL),
        ("cancelled", -1, 300, InterruptStatus.NO_ACTIVE),
        ("focusing", None, 0, InterruptStatus.NO_ACTIVE),
    ],
)
def test_late_interrupt_receipt_depends_on_the_logical_end_and_the_window(
    db: Any, state: str, finalized_offset: int | None, now_offset: int, expected: InterruptStatus
) -> None:
    finalized = None if finalized_offset is None else T0 + timedelta(seconds=finalized_offset)
    row = db.execute(
        "SELECT late_interrupt_status(%s, %s, %s, %s, %s) AS status",
        [state, T0, finalized, T0 + timedelta(seconds=now_offset), WINDOW],
    ).fetchone()
    assert row["status"] == expected.value
