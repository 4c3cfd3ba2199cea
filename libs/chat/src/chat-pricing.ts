import { Prisma } from '@atelier/db';
import type { TokenPricing } from '@atelier/models';

/**
 * A model's token prices as whole numbers of 10^-scale credits (the catalog's decimal format is
 * plain digits, so this is exact), parsed once per model: the estimate and the charge of every
 * chat request are priced with integer arithmetic instead of decimal objects.
 */
interface ScaledPrices {
  input: bigint;
  output: bigint;
  /** 10^(scale - 6): how many units make one micro-credit, the ledger's precision. */
  perMicro: bigint;
}
const parsed = new WeakMap<TokenPricing, ScaledPrices>();

function pricesOf(pricing: TokenPricing): ScaledPrices {
  let prices = parsed.get(pricing);
  if (!prices) {
    const fraction = (price: string) => price.split('.')[1]?.length ?? 0;
    const scale = Math.max(6, fraction(pricing.input_cost_per_token), fraction(pricing.output_cost_per_token));
    const units = (price: string) => {
      const [whole, frac = ''] = price.split('.');
      return BigInt(whole + frac.padEnd(scale, '0'));
    };
    prices = { input: units(pricing.input_cost_per_token), output: units(pricing.output_cost_per_token), perMicro: 10n ** BigInt(scale - 6) };
    parsed.set(pricing, prices);
  }
  return prices;
}

const countable = (n: number) => Number.isSafeInteger(n) && n >= 0;

/**
 * Credits for a number of tokens, as an exact decimal string. Ledger amounts carry 6 decimal
 * places, so a fraction of a micro-credit is rounded up: a request never costs less than its
 * tokens' price.
 */
export function tokenCost(pricing: TokenPricing, promptTokens: number, completionTokens: number): string {
  // Counts a provider reported oddly (fractions, negatives) take the decimal path, with the same rule.
  if (!countable(promptTokens) || !countable(completionTokens)) return decimalTokenCost(pricing, promptTokens, completionTokens);
  const { input, output, perMicro } = pricesOf(pricing);
  const units = input * BigInt(promptTokens) + output * BigInt(completionTokens);
  const micro = ((units + perMicro - 1n) / perMicro).toString().padStart(7, '0');
  const fraction = micro.slice(-6).replace(/0+$/, '');
  return fraction ? `${micro.slice(0, -6)}.${fraction}` : micro.slice(0, -6);
}

function decimalTokenCost(pricing: TokenPricing, promptTokens: number, completionTokens: number): string {
  return new Prisma.Decimal(pricing.input_cost_per_token)
    .times(promptTokens)
    .plus(new Prisma.Decimal(pricing.output_cost_per_token).times(completionTokens))
    .toDecimalPlaces(6, Prisma.Decimal.ROUND_UP)
    .toFixed();
}
