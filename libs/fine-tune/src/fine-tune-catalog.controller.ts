import { Controller, Get } from '@nestjs/common';
import { baseModelListing } from './base-model-listing';
import { RequiresScope } from '@atelier/auth';

/** What a fine-tune can be made of: per script type, the base models, the training_params schema and an example body. */
@Controller('api/fine_tunes')
@RequiresScope('fine_tunes')
export class FineTuneCatalogController {
  private readonly listing = baseModelListing();

  @Get('base_models')
  baseModels() {
    return this.listing;
  }
}
