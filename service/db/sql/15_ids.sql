-- uuid_v7: the ids the Runtime makes (instances, sub-sessions, operations, outbox events,
-- messages). A UUID of version 7 (RFC 9562): the first 48 bits are the time in milliseconds, the
-- rest random. New keys land at the right edge of their indexes, so the calls of one moment share
-- a few index pages instead of a random leaf each; after a checkpoint every first change of a page
-- writes the whole page to the WAL, and random keys made that most of a Pomodoro's WAL
-- (docs/capacity.md). 74 random bits remain: unique in practice; no id here is a secret (every
-- read is authorised by its conversation).
CREATE OR REPLACE FUNCTION uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE
RETURN encode(
    set_bit(set_bit(
        overlay(uuid_send(gen_random_uuid())
                PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                                  FROM 3)
                FROM 1 FOR 6),
        52, 1), 53, 1),
    'hex')::uuid;
