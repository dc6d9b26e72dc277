"""Paging cursors: where the next page of a newest-first outbox list begins.

A cursor is the sort key of the last row shown — ``created_at``, ``conversation_id``, ``sequence``
(the list's order) — as base64url JSON. It names no row, so a page stays right when rows are added
or pruned meanwhile; it is opaque to callers and checked on the way in like any input.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from service.domain.ids import is_recorded_id
from service.domain.timefmt import rfc3339

MAX_CURSOR_LENGTH = 1024
_MAX_SEQUENCE = 2**63 - 1
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True)
class OutboxCursor:
    """The last row of a page: the next page holds the rows after it in the list's order."""

    created_at: datetime
    conversation_id: str
    sequence: int

    def encode(self) -> str:
        key = [rfc3339(self.created_at), self.conversation_id, self.sequence]
        raw = json.dumps(key, ensure_ascii=False, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")

    @classmethod
    def decode(cls, text: str) -> OutboxCursor | None:
        """The cursor ``text`` stands for; None when it is not one this service made."""
        if not 1 <= len(text) <= MAX_CURSOR_LENGTH or not text.isascii():
            return None
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            key = json.loads(raw.decode("utf-8"))
            created_text, conversation_id, sequence = key
            created_at = datetime.strptime(created_text, _TIME_FORMAT).replace(tzinfo=UTC)
        except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
            return None
        if not is_recorded_id(conversation_id) or type(sequence) is not int:
            return None
        if not 0 <= sequence <= _MAX_SEQUENCE:
            return None
        return cls(created_at, conversation_id, sequence)
