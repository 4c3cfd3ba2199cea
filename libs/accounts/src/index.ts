export { AccountsService } from './accounts.service';
export { AccountsModule } from './accounts.module';
