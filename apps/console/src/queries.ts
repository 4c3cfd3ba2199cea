// One query hook per route of the public API the console reads; pages hold no fetching of their own.
import { useQuery, type UseQueryOptions } from '@tanstack/preact-query';
import { api } from './api';

// The answers' types come from their one declaration (libs/contracts' API shapes), never re-declared here.
import type {
  ApiKeyView,
  CheckpointView,
  ConsoleSession,
  ExperimentDetail,
  ExperimentView,
  FeedbackMetricView,
  FineTuneLogEntry,
  FineTunePage,
  FineTuneView,
  Generation,
  GenerationList,
  ModelSummary,
  StoredCompletionList,
  UsageReport,
  UsageRow,
  WebhookDeliveries,
} from '@atelier/contracts';

export type { ExperimentDetail, ExperimentView as Experiment, FeedbackMetricView as FeedbackMetric, StoredCompletionList };
export type { ApiKeyView as ApiKey, CheckpointView as Checkpoint, ConsoleSession as Session, FineTuneLogEntry as FineTuneLog, FineTuneView as FineTune, Generation, ModelSummary, UsageReport as Usage, UsageRow };

type Extra<T> = Omit<UseQueryOptions<T>, 'queryKey' | 'queryFn'>;
const get = <T>(path: string) => () => api<T>('GET', path);

export const useSession = () => useQuery({ queryKey: ['session'], queryFn: get<ConsoleSession>('/api/console/session'), retry: false, staleTime: 60_000 });
export const useCredits = () => useQuery({ queryKey: ['credits'], queryFn: get<Record<string, unknown>>('/api/credits') });
export const useUsage = (from: string, groupBy: string, splitBy?: string) =>
  useQuery({
    queryKey: ['usage', from, groupBy, splitBy],
    queryFn: get<UsageReport>(`/api/usage?from=${encodeURIComponent(from)}&group_by=${groupBy}${splitBy ? `&split_by=${splitBy}` : ''}`),
  });
export const useGenerations = (status: string, offset: number, extra?: Extra<GenerationList>) =>
  useQuery({
    queryKey: ['generations', status, offset],
    queryFn: get<GenerationList>(`/api/ai/queue?status=${status}&limit=24&offset=${offset}`),
    ...extra,
  });
export const useGeneration = (id: string | undefined) => useQuery({ queryKey: ['generation', id], queryFn: get<Generation>(`/api/ai/queue/${id}`), enabled: !!id });
export const useWebhookDeliveries = (id: string | undefined) =>
  useQuery({ queryKey: ['webhooks', id], queryFn: get<WebhookDeliveries>(`/api/ai/queue/${id}/webhooks`), enabled: !!id });
export const useModels = () => useQuery({ queryKey: ['models'], queryFn: get<{ data: ModelSummary[] }>('/api/ai/models'), staleTime: 300_000 });
export const useApiKeys = (enabled: boolean) => useQuery({ queryKey: ['api_keys'], queryFn: get<{ data: ApiKeyView[] }>('/api/api_keys'), enabled });
export const useFineTunes = (extra?: Extra<FineTunePage>) =>
  useQuery({ queryKey: ['fine_tunes'], queryFn: get<FineTunePage>('/api/user/fine_tunes?page_size=100'), ...extra });
export const fineTunePath = (ft: FineTuneView) => `/api/repos/${encodeURIComponent(ft.namespace)}/${encodeURIComponent(ft.repo_name)}/fine_tunes/${ft.id}`;
export const useCheckpoints = (ft: FineTuneView | undefined, extra?: Extra<{ checkpoints: CheckpointView[] }>) =>
  useQuery({ queryKey: ['checkpoints', ft?.id], queryFn: () => api<{ checkpoints: CheckpointView[] }>('GET', `${fineTunePath(ft!)}/checkpoints`), enabled: !!ft, ...extra });
export const useFineTuneLogs = (ft: FineTuneView | undefined, extra?: Extra<{ logs: FineTuneLogEntry[] }>) =>
  useQuery({ queryKey: ['fine_tune_logs', ft?.id], queryFn: () => api<{ logs: FineTuneLogEntry[] }>('GET', `${fineTunePath(ft!)}/logs?limit=500`), enabled: !!ft, ...extra });
export const useBaseModels = () => useQuery({ queryKey: ['base_models'], queryFn: get<unknown>('/api/fine_tunes/base_models'), staleTime: 300_000 });
export const useNamespace = (name: string | undefined) =>
  useQuery({ queryKey: ['admin_namespace', name], queryFn: get<Record<string, unknown>>(`/api/admin/namespaces/${encodeURIComponent(name ?? '')}`), enabled: !!name });
export const useTrainers = (enabled: boolean) => useQuery({ queryKey: ['trainers'], queryFn: get<unknown>('/api/admin/trainers'), enabled });
export const useAdminUsage = (from: string, enabled: boolean) =>
  useQuery({ queryKey: ['admin_usage', from], queryFn: get<UsageReport>(`/api/admin/usage?from=${encodeURIComponent(from)}&group_by=namespace`), enabled });
export const useFeedbackMetrics = () => useQuery({ queryKey: ['feedback_metrics'], queryFn: get<{ data: FeedbackMetricView[] }>('/api/feedback_metrics') });
export const useStoredCompletions = (metric: string, minValue: string) =>
  useQuery({
    queryKey: ['stored_completions', metric, minValue],
    queryFn: get<StoredCompletionList>(`/api/ai/chat/completions?order=desc&limit=20${metric ? `&metric=${encodeURIComponent(metric)}${minValue ? `&min_value=${encodeURIComponent(minValue)}` : ''}` : ''}`),
  });
export const useExperiments = () => useQuery({ queryKey: ['experiments'], queryFn: get<{ data: ExperimentView[] }>('/api/ai/experiments') });
export const useExperiment = (name: string | undefined) =>
  useQuery({ queryKey: ['experiment', name], queryFn: get<ExperimentDetail>(`/api/ai/experiments/${encodeURIComponent(name ?? '')}`), enabled: !!name, refetchInterval: 5000 });
