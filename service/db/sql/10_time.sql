-- The one wire format for times: UTC, microseconds, "Z" (service.domain.timefmt.rfc3339 writes the
-- same), so a result built here reads exactly like one built in Python.
CREATE OR REPLACE FUNCTION rfc3339(moment timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN to_char(moment AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
