-- The one wire format for times: UTC, microseconds, "Z" (service.domain.timefmt.rfc3339 writes the
-- same), so a result built here reads exactly like one built in Python. STABLE, as its body
-- (to_char) is: a function declared IMMUTABLE over a STABLE body is never inlined, and each call
-- then runs as a separate SQL function, about a tenth of a tool call's database work.
CREATE OR REPLACE FUNCTION rfc3339(moment timestamptz) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN to_char(moment AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
