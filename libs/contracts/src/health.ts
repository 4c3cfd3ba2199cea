export interface HealthResponse {
  status: 'ok' | 'error';
  service: string;
  checks: Record<string, { status: 'up' | 'down'; latency_ms?: number; error?: string }>;
}
