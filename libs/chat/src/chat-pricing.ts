import { Prisma } from '@atelier/db';
import type { TokenPricing } from '@atelier/models';

/** Each model's prices parsed once (twice per request otherwise: the estimate and the charge). */
const parsed = new WeakMap<TokenPricing, { input: Prisma.Decimal; output: Prisma.Decimal }>();

function pricesOf(pricing: TokenPricing): { input: Prisma.Decimal; output: Prisma.Decimal } {
  let prices = parsed.get(pricing);
  if (!prices) {
    prices = { input: new Prisma.Decimal(pricing.input_cost_per_token), output: new Prisma.Decimal(pricing.output_cost_per_token) };
    parsed.set(pricing, prices);
  }
  return prices;
}

/**
 * Credits for a number of tokens, as an exact decimal string. Ledger amounts carry 6 decimal
 * places, so a fraction of a micro-credit is rounded up: a request never costs less than its
 * tokens' price.
 */
export function tokenCost(pricing: TokenPricing, promptTokens: number, completionTokens: number): string {
  const { input, output } = pricesOf(pricing);
  return input.times(promptTokens).plus(output.times(completionTokens)).toDecimalPlaces(6, Prisma.Decimal.ROUND_UP).toFixed();
}
