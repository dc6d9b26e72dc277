"""The outcome of a tool call: the word its answer carries (``status``, or ``error`` for a refusal),
as the database's decision functions answer it, and the kinds of answer an outcome can be.

Each Tool's registration (``service.tools``) names its outcomes and their kinds; the database and
the use cases speak outcomes, and ``service.http`` alone turns a kind into an HTTP status.
"""

from __future__ import annotations

from service.domain.errors import Conflict, Gone


class Accepted:
    """An operation was opened; its result comes later, through the outbox."""


class Answered:
    """The answer is complete now."""


#: Every Tool's: the same tool_call_id came with another body (call_tool_v3 answers it).
IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
#: Every Tool's: the same tool_call_id and body, answered longer ago than the history is kept
#: (HISTORY_RETENTION_DAYS): refused, never run again (call_tool_v3 answers it).
TOOL_CALL_EXPIRED = "tool_call_expired"
SHARED_OUTCOMES: dict[str, type] = {IDEMPOTENCY_KEY_REUSED: Conflict, TOOL_CALL_EXPIRED: Gone}
