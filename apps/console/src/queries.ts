// One query hook per route of the public API the console reads; pages hold no fetching of their own.
import { useQuery, type UseQueryOptions } from '@tanstack/preact-query';
import { api } from './api';

export interface Session {
  username: string | null;
  namespace: string | null;
  key_prefix: string | null;
  scopes: string[];
  operator: boolean;
  expires_at: number;
}
export interface UsageRow {
  group: string | null;
  split?: string | null;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  images: number;
  video_seconds: number;
  cost: string;
}
export interface Usage {
  namespace: string;
  from: string;
  to: string;
  group_by: string;
  rows: UsageRow[];
  total: Omit<UsageRow, 'group'>;
}
export interface Generation {
  generation_id: string;
  model_name: string;
  prompt: string;
  media_type: 'image' | 'video';
  status: 'queued' | 'processing' | 'succeeded' | 'failed' | 'cancelled';
  result_url: string | null;
  error_message: string | null;
  enqueued_at: number;
  started_at: number | null;
  completed_at: number | null;
  queue_position: number | null;
  progress: number | null;
  cost: string | null;
  [param: string]: unknown;
}
export interface ModelSummary {
  id: string;
  name?: string;
  modality?: string;
  endpoint?: string;
  [field: string]: unknown;
}
export interface ApiKey {
  prefix: string;
  name: string | null;
  namespace: string;
  scopes: string[] | null;
  expires_at: string | null;
  limits: Record<string, number> | null;
  budget: { max_spend: string; period: string; spent: string } | null;
  created_at: string;
  last_used_at: string | null;
}
export interface FineTune {
  id: string;
  name: string;
  namespace: string;
  repo_name: string;
  base_model: string;
  status: string;
  error: string | null;
  created_at: number;
  updated_at: number;
  [field: string]: unknown;
}
export interface Checkpoint {
  step: number;
  created_at: number | string;
  metrics: { loss?: number; [name: string]: number | undefined } | null;
  model_name: string;
  deployment_status: string | null;
}
export interface FineTuneLog {
  id: number | string;
  type: string;
  created_at: number | string;
  [field: string]: unknown;
}

type Extra<T> = Omit<UseQueryOptions<T>, 'queryKey' | 'queryFn'>;
const get = <T>(path: string) => () => api<T>('GET', path);

export const useSession = () => useQuery({ queryKey: ['session'], queryFn: get<Session>('/api/console/session'), retry: false, staleTime: 60_000 });
export const useCredits = () => useQuery({ queryKey: ['credits'], queryFn: get<Record<string, unknown>>('/api/credits') });
export const useUsage = (from: string, groupBy: string, splitBy?: string) =>
  useQuery({
    queryKey: ['usage', from, groupBy, splitBy],
    queryFn: get<Usage>(`/api/usage?from=${encodeURIComponent(from)}&group_by=${groupBy}${splitBy ? `&split_by=${splitBy}` : ''}`),
  });
export const useGenerations = (status: string, offset: number, extra?: Extra<{ count: number; generations: Generation[]; limit: number; offset: number }>) =>
  useQuery({
    queryKey: ['generations', status, offset],
    queryFn: get<{ count: number; generations: Generation[]; limit: number; offset: number }>(`/api/ai/queue?status=${status}&limit=24&offset=${offset}`),
    ...extra,
  });
export const useGeneration = (id: string | undefined) => useQuery({ queryKey: ['generation', id], queryFn: get<Generation>(`/api/ai/queue/${id}`), enabled: !!id });
export const useWebhookDeliveries = (id: string | undefined) =>
  useQuery({ queryKey: ['webhooks', id], queryFn: get<{ deliveries: Record<string, unknown>[] }>(`/api/ai/queue/${id}/webhooks`), enabled: !!id });
export const useModels = () => useQuery({ queryKey: ['models'], queryFn: get<{ data: ModelSummary[] }>('/api/ai/models'), staleTime: 300_000 });
export const useApiKeys = (enabled: boolean) => useQuery({ queryKey: ['api_keys'], queryFn: get<{ data: ApiKey[] }>('/api/api_keys'), enabled });
export const useFineTunes = (extra?: Extra<{ fine_tunes: FineTune[]; total: number }>) =>
  useQuery({ queryKey: ['fine_tunes'], queryFn: get<{ fine_tunes: FineTune[]; total: number }>('/api/user/fine_tunes?page_size=100'), ...extra });
export const fineTunePath = (ft: FineTune) => `/api/repos/${encodeURIComponent(ft.namespace)}/${encodeURIComponent(ft.repo_name)}/fine_tunes/${ft.id}`;
export const useCheckpoints = (ft: FineTune | undefined, extra?: Extra<{ checkpoints: Checkpoint[] }>) =>
  useQuery({ queryKey: ['checkpoints', ft?.id], queryFn: () => api<{ checkpoints: Checkpoint[] }>('GET', `${fineTunePath(ft!)}/checkpoints`), enabled: !!ft, ...extra });
export const useFineTuneLogs = (ft: FineTune | undefined, extra?: Extra<{ logs: FineTuneLog[] }>) =>
  useQuery({ queryKey: ['fine_tune_logs', ft?.id], queryFn: () => api<{ logs: FineTuneLog[] }>('GET', `${fineTunePath(ft!)}/logs?limit=500`), enabled: !!ft, ...extra });
export const useBaseModels = () => useQuery({ queryKey: ['base_models'], queryFn: get<unknown>('/api/fine_tunes/base_models'), staleTime: 300_000 });
export const useNamespace = (name: string | undefined) =>
  useQuery({ queryKey: ['admin_namespace', name], queryFn: get<Record<string, unknown>>(`/api/admin/namespaces/${encodeURIComponent(name ?? '')}`), enabled: !!name });
export const useTrainers = (enabled: boolean) => useQuery({ queryKey: ['trainers'], queryFn: get<unknown>('/api/admin/trainers'), enabled });
export const useAdminUsage = (from: string, enabled: boolean) =>
  useQuery({ queryKey: ['admin_usage', from], queryFn: get<Usage>(`/api/admin/usage?from=${encodeURIComponent(from)}&group_by=namespace`), enabled });
