-- Time-ordered ids (UUID version 7, RFC 9562) for the rows the settle statement inserts: the ledger's
-- charge entries. The application mints the other per-request keys (reservations, generations) the
-- same way (uuidV7 in @atelier/random). A random (v4) key lands on any page of its primary key's
-- btree, so once the index outgrows shared_buffers nearly every insert reads and dirties a page of
-- its own; a time-ordered key lands on the right-hand edge, where the pages are already in memory.
-- PostgreSQL 18 has uuidv7(); this one works on the versions atelier supports (15 and later).
-- The first 48 bits: Unix time in milliseconds; then version 7, the variant, and random bits from
-- gen_random_uuid().
CREATE FUNCTION atelier_uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$
  SELECT encode(
    set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
      PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
      FROM 1 FOR 6), 52, 1), 53, 1),
    'hex')::uuid
$$;
