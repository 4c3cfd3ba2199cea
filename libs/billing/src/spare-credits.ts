/**
 * How far a namespace's spare credits (or a key's spare budget), as this process last read them,
 * must exceed a request for its work to start while the reservation is still being taken
 * (PaidRequests.reserveAndStart). A hint, never a decision: only the reservation, under the
 * row's lock, takes credits; a wrong yes costs the work begun for a request then refused (its
 * call is cancelled), never credits.
 *
 * A reading up to FRESH_MS old counts when it leaves FACTOR times the request to spare. An older
 * one asks for proportionally more (twice at 10 s, 120 times at 10 min), as more could have been
 * spent meanwhile elsewhere, and none counts after MAX_AGE_MS. So a well-funded namespace's first
 * request after a pause still runs beside its reservation (without this, after 5 s idle it
 * reserved first: 0.7 ms more on a 2-core Intel Xeon VM, 1.6-2.1 ms on a slower one), while a
 * namespace near its end reserves first whatever the reading's age.
 */
export const SPARE_CREDITS = { FACTOR: 100, FRESH_MS: 5_000, MAX_AGE_MS: 10 * 60_000 } as const;

export interface SpareReading {
  /** What could still be spent after this process's last reservation there. */
  available: number;
  /** When it was read (performance.now()). */
  at: number;
}

/** Whether `reading` says a request of `amount` is all but certain to be reserved; 'expired' when it is too old to say. */
export function sparesFor(reading: SpareReading, amount: number, now: number): boolean | 'expired' {
  const age = now - reading.at;
  if (age > SPARE_CREDITS.MAX_AGE_MS) return 'expired';
  return reading.available >= amount * SPARE_CREDITS.FACTOR * Math.max(1, age / SPARE_CREDITS.FRESH_MS);
}
