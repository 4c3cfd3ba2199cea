import {
  Inject,
  Injectable,
  Logger,
  Module,
  type DynamicModule,
  type InjectionToken,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ClusterSweeps, errorSummary } from '@atelier/runtime';
import { BillingModule } from './billing.module';
import { CreditLedger, type StaleReservationRule } from './credit-ledger.service';

const STALE_RESERVATION_RULES = Symbol('STALE_RESERVATION_RULES');

/**
 * Gives back credits held by paid requests that can no longer settle them (their process died
 * between reserve and settle). Each service sweeps the kinds of reservation it runs, by
 * reference prefix; release is idempotent, so replicas sweeping at once are harmless.
 */
@Injectable()
export class StaleReservationSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(StaleReservationSweeper.name);
  private periodic?: { stop(): Promise<void> };

  constructor(
    private readonly sweeps: ClusterSweeps,
    private readonly ledger: CreditLedger,
    @Inject(STALE_RESERVATION_RULES) private readonly rules: StaleReservationRule[],
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'RESERVATION_SWEEP_INTERVAL_MS'>,
  ) {}

  onApplicationBootstrap(): void {
    // One lease per set of kinds: each service's kinds are swept once per interval, whichever services run.
    const kinds = this.rules.map((r) => r.prefix).sort().join(',');
    this.periodic = this.sweeps.every(`stale-reservations:${kinds}`, this.config.RESERVATION_SWEEP_INTERVAL_MS, () => this.sweep(), (err) =>
      this.logger.warn(`Stale reservation sweep failed: ${errorSummary(err)}`),
    );
  }

  /** One pass over every rule; the number of reservations released. */
  async sweep(): Promise<number> {
    let total = 0;
    for (const rule of this.rules) {
      const released = await this.ledger.releaseStale(rule);
      if (released) this.logger.warn(`Released ${released} ${rule.prefix} credit reservation(s) left open by a crashed process`);
      total += released;
    }
    return total;
  }

  async onModuleDestroy(): Promise<void> {
    await this.periodic?.stop();
  }
}

/** Imported by a feature's service module with the rules of the paid requests it runs. */
@Module({})
export class StaleReservationsModule {
  static forRoot(rules: {
    imports?: DynamicModule['imports'];
    inject?: InjectionToken[];
    useFactory: (...deps: never[]) => StaleReservationRule[];
  }): DynamicModule {
    return {
      module: StaleReservationsModule,
      imports: [BillingModule, ...(rules.imports ?? [])],
      providers: [{ provide: STALE_RESERVATION_RULES, inject: rules.inject ?? [], useFactory: rules.useFactory }, StaleReservationSweeper],
      exports: [StaleReservationSweeper],
    };
  }
}
