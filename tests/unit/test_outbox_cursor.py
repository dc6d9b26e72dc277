"""Outbox paging cursors: what next_cursor says comes back as the same key; anything else is refused."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest

from service.domain.cursors import MAX_CURSOR_LENGTH, OutboxCursor


def encoded(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def test_a_cursor_reads_back_as_the_key_it_was_made_from() -> None:
    cursor = OutboxCursor(datetime(2026, 11, 30, 7, 50, 6, 904546, tzinfo=UTC), "conv/ü 1", 42)
    assert OutboxCursor.decode(cursor.encode()) == cursor


@pytest.mark.parametrize(
    "text",
    [
        "",
        "!!!",
        "x" * (MAX_CURSOR_LENGTH + 1),
        encoded("[]"),
        encoded("{}"),
        encoded('["2026-11-30T07:50:06.904546Z", "c"]'),
        encoded('["2026-11-30T07:50:06Z", "c", 1]'),  # not the wire format
        encoded('["2026-11-30T07:50:06.904546Z", "", 1]'),
        encoded('["2026-11-30T07:50:06.904546Z", "c\\u0000", 1]'),
        encoded('["2026-11-30T07:50:06.904546Z", "c", -1]'),
        encoded('["2026-11-30T07:50:06.904546Z", "c", 1.5]'),
        encoded('["2026-11-30T07:50:06.904546Z", "c", true]'),
        encoded('["2026-11-30T07:50:06.904546Z", "c", 9223372036854775808]'),
        encoded('"abc"'),
        "w6k",  # valid base64 of non-UTF-8 bytes
    ],
)
def test_anything_but_a_cursor_this_service_made_is_refused(text: str) -> None:
    assert OutboxCursor.decode(text) is None
