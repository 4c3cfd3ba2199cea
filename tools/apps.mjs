// The six services as every launcher sees them: `npm start`, the soak, the container images and
// their smoke test. The port variable and its default are the app's config (libs/config); the
// probe paths are the ones the Kubernetes manifests use (deploy/manifests.spec.ts checks both).
export const APPS = [
  { name: 'gateway', portVar: 'PORT', port: 8080 },
  { name: 'chat', portVar: 'CHAT_PORT', port: 8081 },
  { name: 'media', portVar: 'MEDIA_PORT', port: 8082 },
  { name: 'queue-worker', portVar: 'QUEUE_WORKER_PORT', port: 8083 },
  { name: 'events', portVar: 'EVENTS_PORT', port: 8084 },
  { name: 'fine-tune', portVar: 'FINE_TUNE_PORT', port: 8085 },
];

/** Readiness (and start-up): 200 once the app's Postgres and Redis answer. */
export const READINESS_PATH = '/health';
/** Liveness: 200 while the process serves at all. */
export const LIVENESS_PATH = '/health/live';
