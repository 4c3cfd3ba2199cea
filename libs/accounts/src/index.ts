export { AccountsService, type OrgMembership } from './accounts.service';
export { AccountsModule } from './accounts.module';
export { ApiKeys, type ApiKeyView } from './api-keys.service';
export { AccountsRoutesModule } from './accounts-routes.module';
export { QueueWeights } from './queue-weights.service';
