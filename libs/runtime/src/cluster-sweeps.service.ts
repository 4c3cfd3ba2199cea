import os from 'node:os';
import { Injectable } from '@nestjs/common';
import { randomToken } from '@atelier/random';
import { runPeriodically } from './periodic-task';
import { RedisService } from './redis.module';

/**
 * Periodic maintenance (lost jobs, expired leases, retention) that is work for the deployment, not
 * for each replica: every replica ticks at the interval, and a tick runs the sweep only when it
 * takes the sweep's lease (`SET NX PX` for 90 % of the interval), so across all replicas it runs
 * about once per interval however many there are. A replica that dies mid-sweep leaves the lease
 * to expire, and the next tick anywhere sweeps. The sweeps stay safe to overlap (each claims its
 * rows with SKIP LOCKED or a guarded update); the lease only stops N replicas from doing the same
 * work N times. While Redis cannot be reached the sweep runs anyway: the rows it repairs matter
 * more then, not less.
 */
@Injectable()
export class ClusterSweeps {
  /** Who holds a lease (for an operator reading Redis). */
  private readonly holder = `${os.hostname()}:${process.pid}:${randomToken(6)}`;

  constructor(private readonly redis: RedisService) {}

  every(name: string, intervalMs: number, sweep: () => Promise<unknown>, onError: (err: Error) => void): { stop(): Promise<void> } {
    return runPeriodically(
      intervalMs,
      async () => {
        if (await this.take(name, intervalMs)) await sweep();
      },
      onError,
    );
  }

  /** Whether this replica sweeps `name` for the interval starting now. */
  async take(name: string, intervalMs: number): Promise<boolean> {
    try {
      const taken = await this.redis.client.set(this.redis.names.key('sweep-lease', name), this.holder, 'PX', Math.max(1, Math.floor(intervalMs * 0.9)), 'NX');
      return taken === 'OK';
    } catch {
      return true;
    }
  }
}
