import { Injectable } from '@nestjs/common';
import { RedisService } from '@atelier/runtime';

/** A running generation's progress outlives a worker crash by this long at most. */
const PROGRESS_TTL_SECONDS = 3600;
/** Writes of one generation's progress are spaced at least this far apart (the last one always lands). */
const MIN_INTERVAL_MS = 250;

/**
 * The progress (0-1) of running generations, as their engines report it: one short-lived Redis key
 * per generation, written by the worker at most every 250 ms, read with the record. Engines that
 * cannot tell report nothing, and the record says null.
 */
@Injectable()
export class GenerationProgress {
  constructor(private readonly redis: RedisService) {}

  private key(id: string): string {
    return this.redis.names.key('generation-progress', id);
  }

  /** A reporter for one run: throttled, never throws, and never goes backwards. */
  reporter(id: string): { report(fraction: number): void; flush(): Promise<void> } {
    let last = -1;
    let lastWrite = 0;
    let pending: number | undefined;
    let timer: NodeJS.Timeout | undefined;
    let writing: Promise<unknown> = Promise.resolve();
    const write = (value: number) => {
      lastWrite = Date.now();
      writing = this.redis.client.set(this.key(id), value.toFixed(4), 'EX', PROGRESS_TTL_SECONDS).catch(() => undefined);
    };
    const writePending = () => {
      timer = undefined;
      if (pending !== undefined) write(pending);
      pending = undefined;
    };
    return {
      report: (fraction) => {
        if (!Number.isFinite(fraction)) return;
        const value = Math.min(1, Math.max(0, fraction));
        if (value <= last) return;
        last = value;
        const wait = lastWrite + MIN_INTERVAL_MS - Date.now();
        if (wait <= 0) return write(value);
        pending = value;
        timer ??= setTimeout(writePending, wait);
      },
      flush: async () => {
        clearTimeout(timer);
        writePending();
        await writing;
      },
    };
  }

  async read(ids: string[]): Promise<Map<string, number | null>> {
    const out = new Map<string, number | null>();
    if (ids.length === 0) return out;
    // MGET needs its keys on one shard; in a Redis Cluster they are spread, so one GET each.
    const keys = ids.map((id) => this.key(id));
    const values = this.redis.clustered ? await Promise.all(keys.map((k) => this.redis.client.get(k))) : await this.redis.client.mget(...keys);
    ids.forEach((id, i) => out.set(id, values[i] === null ? null : Number(values[i])));
    return out;
  }

}
