"""Write limits: how much each principal (a conversation, a person's session) has written in the
current window, per kind of write. One row per (principal, kind), rewritten in place: the counter
never grows with the writes it counts. Read and updated by ``spend_write``
(``service/db/sql/45_limits.sql``) in the transaction of the write it counts."""

from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, Column, Integer, Table, Text

from service.db.tables.conventions import metadata, timestamp

write_allowances = Table(
    "write_allowances",
    metadata,
    Column("principal", Text, primary_key=True),
    Column("kind", Text, primary_key=True),
    timestamp("window_start"),
    Column("writes", Integer, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    CheckConstraint("writes >= 0 AND bytes >= 0", name="counts_not_negative"),
)
