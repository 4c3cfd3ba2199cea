import type { ApiError } from '@atelier/contracts';
import type { ModelDefinition } from '@atelier/models';

/** What one line asks of its model: the body it runs with and the most it can cost at the batch price, or the route's refusal. */
export type LinePlan = { body: Record<string, unknown>; estimate: string } | { refused: ApiError };

/** Who a line runs for: its batch's namespace and user. */
export interface LineCaller {
  userId: string;
  namespaceId: string;
  namespace: string;
}

/** A line's answer: its body (as the route answers), what it used, and what that costs at the batch price. */
export interface LineAnswer {
  body: unknown;
  inputTokens: number;
  outputTokens: number;
  images?: number;
  cost: string;
  provider: string | null;
}

/**
 * One batch endpoint: which models it takes, the route's own check and price bound of a line's
 * body (at validation), and the call itself (when the line runs, on the line's reservation). A
 * refusal or a failure of the call is thrown as the route would answer it (an ApiError).
 */
export interface BatchLineRunner {
  model(name: string): ModelDefinition | undefined;
  plan(model: ModelDefinition, body: Record<string, unknown>): LinePlan;
  run(model: ModelDefinition, body: Record<string, unknown>, caller: LineCaller, ids: { requestId: string; reservationId: string }): Promise<LineAnswer>;
}
