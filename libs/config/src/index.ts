export { type AppConfig, ConfigError, DEV_URL_SIGNING_SECRET, parseConfig, loadConfig, loadConfigOrExit, secretFromEnv } from './app-config';
export { APP_CONFIG, ConfigModule } from './config.module';
