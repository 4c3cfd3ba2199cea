import { Prisma } from '@atelier/db';

/**
 * A batch line's price: the route's price less the model's batch_discount (BATCH_DISCOUNT when
 * its catalog entry sets none), rounded up to the ledger's six places.
 */
export function discounted(price: string, model: { batch_discount?: number }, defaultDiscount: number): string {
  const discount = model.batch_discount ?? defaultDiscount;
  return new Prisma.Decimal(price).times(1 - discount).toDecimalPlaces(6, Prisma.Decimal.ROUND_UP).toFixed();
}
