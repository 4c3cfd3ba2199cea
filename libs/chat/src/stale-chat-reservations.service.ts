import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { CreditLedger } from '@atelier/billing';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { errorSummary } from '@atelier/runtime';

/** Chat reservations are settled right after the response; a gateway that dies in between leaves one open. */
export const CHAT_RESERVATION_PREFIX = 'chat:';

/**
 * Gives back credits held by chat requests that can no longer be running: older than the
 * longest a gateway waits for an answer (RPC_TIMEOUT_MS) plus a margin. Runs in every chat
 * replica; release is idempotent, so overlapping sweeps are harmless.
 */
@Injectable()
export class StaleChatReservations implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(StaleChatReservations.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(
    private readonly ledger: CreditLedger,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  get maxAgeMs(): number {
    return this.config.RPC_TIMEOUT_MS + 5 * 60_000;
  }

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => {
      this.running ??= this.sweep()
        .then((n) => {
          if (n) this.logger.warn(`Released ${n} chat credit reservation(s) left open by a crashed gateway`);
        })
        .catch((err: Error) => this.logger.warn(`Stale reservation sweep failed: ${errorSummary(err)}`))
        .finally(() => (this.running = undefined));
    }, 60_000);
    this.timer.unref();
  }

  sweep(): Promise<number> {
    return this.ledger.releaseStale(CHAT_RESERVATION_PREFIX, this.maxAgeMs);
  }

  async onModuleDestroy(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
