"""A question may be an app's forms: the asking Tool, its forms and the answers given so far

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-08 12:00:00+00:00

A MiniApp's Tool asks the person forms of its own through the Runtime API (``app_ask``,
``service/db/sql/75_app_api.sql``): the question is a row of ``interactions`` as ``interact.ask``'s
is, with three new nullable columns, all ``NULL`` on ``interact.ask``'s rows:

- ``tool``: the Tool that asked (its outbox row names it);
- ``forms``: ``{key: {"message", "requestedSchema"}}``, each an MCP elicitation form;
- ``answers``: ``{key: content}``, the forms answered so far, each once.

``ck_interactions_forms_object`` holds ``forms`` an object, ``ck_interactions_form_tool`` a form
question's Tool named, ``ck_interactions_answers_of_forms`` answers only on a form question.

Rolling: adding nullable columns without a default changes the catalog only; one short transaction
under the table's lock (a short ``lock_timeout`` tried again until it is had) adds them and the
checks ``NOT VALID`` (new rows meet them at once); each check is then validated on its own (a scan
that lets writes through; every row has the new columns ``NULL``, so it cannot fail). The release
before never writes them: its rows are ``interact.ask``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.db.migration_steps import lock_tables, own_connection

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHECKS = (
    ("ck_interactions_forms_object", "forms IS NULL OR jsonb_typeof(forms) = 'object'"),
    ("ck_interactions_form_tool", "(forms IS NULL) = (tool IS NULL)"),
    ("ck_interactions_answers_of_forms", "answers IS NULL OR forms IS NOT NULL"),
)


def upgrade() -> None:
    with own_connection() as conn:
        present = {
            name
            for (name,) in conn.execute(
                "SELECT conname FROM pg_constraint WHERE connamespace = 'public'::regnamespace"
            ).fetchall()
        }
        with conn.transaction():
            lock_tables(conn, ("interactions",))
            conn.execute(
                "ALTER TABLE interactions ADD COLUMN IF NOT EXISTS tool text,"
                " ADD COLUMN IF NOT EXISTS forms jsonb, ADD COLUMN IF NOT EXISTS answers jsonb"
            )
            for name, expression in CHECKS:
                if name not in present:
                    conn.execute(
                        f"ALTER TABLE interactions ADD CONSTRAINT {name} CHECK ({expression}) NOT VALID"
                    )
        for name, _ in CHECKS:
            conn.execute(f"ALTER TABLE interactions VALIDATE CONSTRAINT {name}")


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")
