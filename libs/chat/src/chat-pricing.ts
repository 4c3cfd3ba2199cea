import { Prisma } from '@atelier/db';
import type { TokenPricing } from '@atelier/models';

/**
 * Credits for a number of tokens, as an exact decimal string. Ledger amounts carry 6 decimal
 * places, so a fraction of a micro-credit is rounded up: a request never costs less than its
 * tokens' price.
 */
export function tokenCost(pricing: TokenPricing, promptTokens: number, completionTokens: number): string {
  return new Prisma.Decimal(pricing.input_cost_per_token)
    .times(promptTokens)
    .plus(new Prisma.Decimal(pricing.output_cost_per_token).times(completionTokens))
    .toDecimalPlaces(6, Prisma.Decimal.ROUND_UP)
    .toFixed();
}
