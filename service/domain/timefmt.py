"""The one wire format for times: RFC 3339, UTC, microseconds, ``Z``.

The database formats the same way (``rfc3339()`` in the migrations) so that a result built in SQL
and one built here compare equal.
"""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else rfc3339(moment)
