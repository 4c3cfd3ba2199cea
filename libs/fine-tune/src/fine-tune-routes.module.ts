import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import { ReposGatewayModule } from '@atelier/repos';
import { FineTuneCatalogController } from './fine-tune-catalog.controller';
import { FineTuneGatewayModule } from './fine-tune-gateway.module';
import { LoraAdapters } from '@atelier/models';
import { FineTuneDeployments } from './fine-tune-deployments.service';
import { FineTuneListingsController } from './fine-tune-listings.controller';
import { FineTuneReports } from './fine-tune-reports.service';
import { FineTuneRunsController } from './fine-tune-runs.controller';
import { FineTuneRuns } from './fine-tune-runs.service';
import { FineTunesController } from './fine-tunes.controller';
import { TrainerController, TrainersAdminController } from './trainer.controller';
import { TrainerLeases } from './trainer-leases.service';
import { TrainerGuard, Trainers } from './trainers.service';

/** Fine-tunes' HTTP routes on the gateway (the owner's and the trainers'), beside the services they call. */
@Module({
  imports: [FineTuneGatewayModule, ReposGatewayModule, AuthModule, BillingModule],
  controllers: [FineTunesController, FineTuneRunsController, FineTuneListingsController, FineTuneCatalogController, TrainerController, TrainersAdminController],
  providers: [FineTuneRuns, FineTuneReports, FineTuneDeployments, LoraAdapters, TrainerLeases, Trainers, TrainerGuard],
})
export class FineTuneRoutesModule {}
