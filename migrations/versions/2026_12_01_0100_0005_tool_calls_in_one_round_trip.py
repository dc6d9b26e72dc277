"""tool calls in one round trip; no NOTIFY inside a deciding transaction

This revision made the decision engine SQL functions (``call_tool``, ``settle_focusing`` and the
Tools' functions) and took the NOTIFYs out of every deciding transaction. Their text now lives in
``service/db/sql/``, applied by ``migrate`` after the table migrations (``service.db.code``), which
also drops what is no longer there (the relays' old wake-up trigger among them); this revision has
no table change of its own.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 01:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
