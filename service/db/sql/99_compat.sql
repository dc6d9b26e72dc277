-- What the previous release (0.4.0, releases.toml) still reads, kept while it may serve beside this
-- one (a rolling upgrade runs both against this schema), and the interfaces this schema serves.
-- Everything here but database_interfaces() goes in the next release's contract step. See README.md
-- in this folder.

-- The interface generations of the database code that this schema serves: each release of the
-- service checks that its own is among them before it reports ready (service.db.code.INTERFACE;
-- 0.4.0's is 4 as well).
CREATE OR REPLACE FUNCTION database_interfaces() RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ARRAY[4];

-- The HTTP status 0.4.0's operators' reads select as tool_calls.status_code (its list and trace of
-- recorded calls, service/db/ops_queries.py there): the column went in migration 0023, and a
-- function of one table row is read as that row's field, so "t.status_code" of a tool_calls row is
-- this. The status the contract gives the outcome word (this release's reads name it in their API
-- layer alone, service/http.py; a test keeps the two equal). Nothing writes or pays for it.
CREATE OR REPLACE FUNCTION status_code(tool_calls) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ('{"accepted": 202, "interrupted": 200, "operation_already_final": 200,
          "no_active_focusing_operation": 200, "operation_already_focusing": 409,
          "idempotency_key_reused": 409, "tool_call_expired": 410,
          "too_many_requests": 429}'::jsonb ->> ($1).outcome)::integer;
