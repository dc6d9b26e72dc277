"""What one delivery attempt means for its row: delivered, retry later, or dead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Verdict = Literal["delivered", "retry", "dead"]


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """What came back from one POST: a status code, or the class of the error that stopped it."""

    status_code: int | None
    error_class: str | None = None
    error_message: str = ""
    retry_after: str | None = None
    excerpt: str | None = None


def is_retryable_status(status_code: int) -> bool:
    # Redirects are never followed: the Agent's URL is configured, not discovered.
    return status_code in (408, 429) or 300 <= status_code < 400 or status_code >= 500


def verdict(result: AttemptResult, attempts: int, max_attempts: int) -> Verdict:
    """2xx delivers; 408/429/3xx/5xx and transport errors retry until ``max_attempts``; other 4xx die."""
    code = result.status_code
    if code is not None and 200 <= code < 300:
        return "delivered"
    if code is not None and not is_retryable_status(code):
        return "dead"
    return "dead" if attempts >= max_attempts else "retry"


def describe(result: AttemptResult) -> str:
    """The row's ``last_error``: short enough to read in a table listing."""
    if result.status_code is not None:
        text = f"HTTP {result.status_code}"
        if result.excerpt:
            text += f": {result.excerpt[:200]}"
        return text
    return f"{result.error_class}: {result.error_message}"[:300]
