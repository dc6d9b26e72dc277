"""delivery control: the endpoint's pause and circuit, the delivered tally, the retention report

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 01:00:00+00:00

Expand-only: three new tables. Relays of the previous release neither read nor write them and
keep delivering as before (they ignore a pause or an open circuit until they are replaced).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The tally starts from the delivered rows there are now: a one-off read, under no lock that
# writers wait for. Rows a previous-release relay delivers during the upgrade are not counted.
SEED_TALLY = """
INSERT INTO outbox_tallies (shard, delivered)
SELECT 0, count(*) FROM outbox WHERE status = 'delivered'
"""


def upgrade() -> None:
    op.create_table(
        "delivery_endpoints",
        sa.Column("endpoint", sa.Text(), nullable=False),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("paused_by", sa.Text(), nullable=True),
        sa.Column("pause_reason", sa.Text(), nullable=True),
        sa.Column("circuit", sa.Text(), server_default=sa.text("'closed'"), nullable=False),
        sa.Column(
            "circuit_since", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("next_probe_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("probe_owner", sa.Text(), nullable=True),
        sa.Column("probe_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_probe_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "circuit IN ('closed', 'open', 'half_open')", name=op.f("ck_delivery_endpoints_circuit")
        ),
        sa.CheckConstraint(
            "char_length(endpoint) BETWEEN 1 AND 100", name=op.f("ck_delivery_endpoints_endpoint_length")
        ),
        sa.CheckConstraint(
            "(paused_at IS NULL) = (paused_by IS NULL)", name=op.f("ck_delivery_endpoints_paused_pair")
        ),
        sa.CheckConstraint(
            "paused_at IS NOT NULL OR pause_reason IS NULL",
            name=op.f("ck_delivery_endpoints_reason_while_paused"),
        ),
        sa.CheckConstraint(
            "char_length(pause_reason) <= 500", name=op.f("ck_delivery_endpoints_pause_reason_length")
        ),
        sa.CheckConstraint(
            "(circuit = 'closed') = (next_probe_at IS NULL)",
            name=op.f("ck_delivery_endpoints_probe_while_not_closed"),
        ),
        sa.CheckConstraint(
            "(probe_owner IS NULL) = (probe_expires_at IS NULL)",
            name=op.f("ck_delivery_endpoints_probe_pair"),
        ),
        sa.CheckConstraint(
            "probe_owner IS NULL OR circuit = 'half_open'", name=op.f("ck_delivery_endpoints_probe_half_open")
        ),
        sa.PrimaryKeyConstraint("endpoint", name=op.f("pk_delivery_endpoints")),
    )
    op.execute("INSERT INTO delivery_endpoints (endpoint) VALUES ('agent')")
    op.create_table(
        "outbox_tallies",
        sa.Column("shard", sa.Integer(), nullable=False),
        sa.Column("delivered", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.CheckConstraint("shard BETWEEN 0 AND 63", name=op.f("ck_outbox_tallies_shard_range")),
        sa.CheckConstraint("delivered >= 0", name=op.f("ck_outbox_tallies_delivered_nonnegative")),
        sa.PrimaryKeyConstraint("shard", name=op.f("pk_outbox_tallies")),
    )
    op.execute(SEED_TALLY)
    op.create_table(
        "outbox_retention",
        sa.Column("id", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("delivered_days", sa.Integer(), nullable=False),
        sa.Column("dead_days", sa.Integer(), nullable=False),
        sa.Column("reported_by", sa.Text(), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("last_pruned_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_pruned_rows", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.CheckConstraint("id", name=op.f("ck_outbox_retention_one_row")),
        sa.CheckConstraint("delivered_days >= 1", name=op.f("ck_outbox_retention_delivered_days_positive")),
        sa.CheckConstraint("dead_days >= 0", name=op.f("ck_outbox_retention_dead_days_nonnegative")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox_retention")),
    )


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
