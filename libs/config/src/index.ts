export { type AppConfig, ConfigError, parseConfig, loadConfig, loadConfigOrExit } from './app-config';
export { APP_CONFIG, ConfigModule } from './config.module';
