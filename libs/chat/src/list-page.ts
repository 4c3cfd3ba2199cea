import { invalid } from './chat-request';

export interface ListPage {
  after?: string;
  limit: number;
  order: 'asc' | 'desc';
}

/**
 * OpenAI's cursor paging on the chat lists (a response's input items, stored completions and their
 * messages): `limit` 1-100 (default 20), `order` (the list's own default), `after` an id of `what`.
 */
export function listPage(query: Record<string, unknown>, defaultOrder: 'asc' | 'desc', what: string): ListPage {
  const limit = query.limit === undefined ? 20 : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw invalid([{ field: 'limit', message: 'limit must be an integer between 1 and 100' }]);
  const order = query.order ?? defaultOrder;
  if (order !== 'asc' && order !== 'desc') throw invalid([{ field: 'order', message: 'order must be asc or desc' }]);
  if (query.after !== undefined && typeof query.after !== 'string') throw invalid([{ field: 'after', message: `after must be ${what}` }]);
  return { limit, order, ...(typeof query.after === 'string' && { after: query.after }) };
}
