import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { createPgPool } from '@atelier/db';
import { createTestEnvironment, uniqueName, type TestEnvironment } from '@atelier/testing';
import { ChatUsageRecorder, type ChatUsageRecord } from './chat-usage.recorder';

describe('ChatUsageRecorder (real Postgres)', () => {
  let env: TestEnvironment;
  let pool: Pool;
  let recorder: ChatUsageRecorder;
  let userId: string;
  let namespaceId: string;

  beforeAll(async () => {
    env = await createTestEnvironment();
    pool = createPgPool(env.databaseUrl, 1, 'chat-usage-recorder-spec');
    userId = randomUUID();
    namespaceId = randomUUID();
    await pool.query(`INSERT INTO users (id, username) VALUES ($1, $2)`, [userId, uniqueName('usage')]);
    await pool.query(`INSERT INTO namespaces (id, name, type, credits) VALUES ($1, $2, 'user', 10)`, [namespaceId, uniqueName('usage')]);
  });
  beforeEach(() => {
    recorder = new ChatUsageRecorder(env.config);
  });
  afterEach(async () => {
    await recorder.onModuleDestroy();
  });
  afterAll(async () => {
    await pool?.end();
    await env?.cleanup();
  });

  const row = (overrides: Partial<ChatUsageRecord> = {}): ChatUsageRecord => ({
    id: `chatcmpl-${randomUUID()}`,
    namespaceId,
    userId,
    model: 'local-chat',
    provider: 'local',
    stream: false,
    status: 'succeeded',
    promptTokens: 10,
    completionTokens: 5,
    cost: '0.00002',
    reservationId: randomUUID(),
    requestId: randomUUID(),
    errorMessage: null,
    durationMs: 3,
    ...overrides,
  });

  async function recorded(ids: string[]): Promise<Map<string, string | null>> {
    const { rows } = await pool.query<{ id: string; error_message: string | null }>(`SELECT id, error_message FROM chat_usage WHERE id = ANY($1)`, [ids]);
    return new Map(rows.map((r) => [r.id, r.error_message]));
  }

  it('records a failed request whose provider error text holds a NUL, and the requests written with it', async () => {
    const rows = [row(), row({ status: 'failed', completionTokens: 0, cost: '0', errorMessage: 'The model provider failed with HTTP 500: bad\u0000byte' }), row(), row()];
    rows.forEach((r) => recorder.record(r));
    await recorder.drain();
    const got = await recorded(rows.map((r) => r.id));
    expect(got.size).toBe(4);
    expect(got.get(rows[1].id)).toBe('The model provider failed with HTTP 500: bad\uFFFDbyte');
  });

  it('loses only the row Postgres refuses, not the others written in the same batch', async () => {
    // A namespace deleted while its request ran: its row breaks the foreign key.
    const orphan = row({ namespaceId: randomUUID() });
    const rows = [row(), row(), orphan, row(), row()];
    rows.forEach((r) => recorder.record(r));
    await recorder.drain();
    const got = await recorded(rows.map((r) => r.id));
    expect([...got.keys()].sort()).toEqual(rows.filter((r) => r !== orphan).map((r) => r.id).sort());

    // Rows recorded afterwards are written as before.
    const later = [row(), row(), row()];
    later.forEach((r) => recorder.record(r));
    await recorder.drain();
    expect((await recorded(later.map((r) => r.id))).size).toBe(3);
  });
});
