import { uniqueName } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

/** A burst that exhausts the database pool is overload: 503 with Retry-After, never a 500, and the pool queues so most of it succeeds. */
describe('a burst past the database pool', () => {
  const started: GatewayHarness[] = [];
  afterAll(async () => {
    for (const gw of started) await gw.close();
  });
  const burst = async (gw: GatewayHarness, n: number) =>
    Promise.all(
      Array.from({ length: n }, () =>
        gw.http.request<{ error?: { type: string; message: string } }>('POST', '/api/admin/users', { token: gw.adminToken, body: { username: uniqueName('burst'), credits: '1' } }),
      ),
    );

  it('answers what the pool cannot take in time with 503 and Retry-After in the envelope, never 500', async () => {
    const gw = await startGateway({ DATABASE_POOL_SIZE: '2', DATABASE_TX_MAX_WAIT_MS: '20' });
    started.push(gw);
    const answers = await burst(gw, 150);
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s !== 201 && s !== 503)).toEqual([]);
    const refused = answers.filter((a) => a.status === 503);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.headers['retry-after']).toBeDefined();
      expect(r.body.error).toEqual({ ...r.body.error, type: 'service_unavailable', message: 'The database is at capacity (every connection is busy); retry in a moment' });
    }
  }, 60_000);

  it('queues a burst of 300 for the pool with the default settings: every one succeeds', async () => {
    const gw = await startGateway();
    started.push(gw);
    const statuses = (await burst(gw, 300)).map((a) => a.status);
    expect(statuses.filter((s) => s !== 201)).toEqual([]);
  }, 60_000);
});
