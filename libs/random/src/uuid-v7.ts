import { randomUUID } from 'node:crypto';

/**
 * A UUID version 7 (RFC 9562): the Unix time in milliseconds in its first 48 bits, then 74
 * random bits (taken from crypto.randomUUID, which draws from a buffered pool). Rows that a
 * request inserts (reservations, ledger charges, generations) are keyed by these so that each
 * new key lands on the right-hand edge of its btree, where the pages are already in memory.
 * Random (v4) keys land on any page: once a table outgrows shared_buffers, nearly every insert
 * reads and dirties a page of its own (docs/credits.md, "Time-ordered ids").
 *
 * Ids minted in different milliseconds sort in that order, as strings and as Postgres uuids;
 * within one millisecond they sort at random.
 */
export function uuidV7(now: number = Date.now()): string {
  const time = now.toString(16).padStart(12, '0');
  // randomUUID(): xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx; from index 15 on, its random bits and the
  // RFC variant, so only the time and the version digit are written here.
  return `${time.slice(0, 8)}-${time.slice(8, 12)}-7${randomUUID().slice(15)}`;
}

/** The millisecond a uuidV7 was minted in (undefined for any other UUID version). */
export function uuidV7Time(id: string): number | undefined {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.test(id)) return undefined;
  return parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}
