import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { BillingModule } from './billing.module';
import { CreditsController } from './credits.controller';
import { UsageController } from './usage.controller';

/** Billing's HTTP routes on the gateway (credits, usage). Apart from BillingModule, which every paid service imports. */
@Module({ imports: [BillingModule, AuthModule], controllers: [CreditsController, UsageController] })
export class BillingRoutesModule {}
