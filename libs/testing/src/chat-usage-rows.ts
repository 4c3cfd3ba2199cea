/** A row of the chat_usage view: one chat request that reported how it ended, kept on its credit reservation. */
export interface ChatUsageRow {
  id: string;
  namespaceId: string;
  userId: string | null;
  model: string | null;
  provider: string | null;
  stream: boolean | null;
  status: 'succeeded' | 'failed' | 'cancelled';
  promptTokens: number;
  completionTokens: number;
  /** What was charged, as an exact decimal string. */
  cost: string;
  reservationId: string;
  requestId: string | null;
  errorMessage: string | null;
  durationMs: number | null;
  createdAt: Date;
}

/** Anything that runs raw SQL the way Prisma's clients do. */
interface RawQueries {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
}

/** The chat_usage rows of one completion id, or of one namespace (by name), oldest first. */
export function chatUsageRows(db: RawQueries, where: { id: string } | { namespace: string }): Promise<ChatUsageRow[]> {
  const [condition, value] = 'id' in where ? ['u.id = $1', where.id] : ['n.name = $1', where.namespace];
  return db.$queryRawUnsafe<ChatUsageRow[]>(
    `SELECT u.id, u.namespace_id::text AS "namespaceId", u.user_id::text AS "userId", u.model, u.provider, u.stream, u.status::text AS status,
            u.prompt_tokens AS "promptTokens", u.completion_tokens AS "completionTokens", u.cost::text AS cost,
            u.reservation_id::text AS "reservationId", u.request_id AS "requestId", u.error_message AS "errorMessage",
            u.duration_ms AS "durationMs", u.created_at AS "createdAt"
     FROM chat_usage u JOIN namespaces n ON n.id = u.namespace_id
     WHERE ${condition} ORDER BY u.created_at, u.id`,
    value,
  );
}
