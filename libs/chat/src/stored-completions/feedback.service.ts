import { Injectable } from '@nestjs/common';
import { NamespaceAccess, type Caller } from '@atelier/auth';
import { ApiError, CreateFeedbackMetricRequest, CreateFeedbackRequest } from '@atelier/contracts';
import { parseBody } from '@atelier/runtime';
import { invalid } from '../chat-request';
import { ResponsesRepository } from '../responses/responses.repository';
import { FeedbackRepository, type FeedbackMetricRow } from './feedback.repository';
import { feedbackView, StoredCompletions } from './stored-completions.service';
import { Experiments } from '../experiments/experiments.service';

const metricView = (m: FeedbackMetricRow, namespace: string) => ({
  id: m.id,
  object: 'feedback_metric' as const,
  name: m.name,
  type: m.type,
  optimize: m.optimize,
  namespace,
  created_at: Math.floor(m.createdAt.getTime() / 1000),
});

/**
 * Feedback, as TensorZero keeps it: metrics declared per namespace (a name, boolean or float, and
 * which way is better), and judgements of a stored completion or response of the caller's
 * namespaces on one of its namespace's metrics.
 */
@Injectable()
export class FeedbackService {
  constructor(
    private readonly rows: FeedbackRepository,
    private readonly completions: StoredCompletions,
    private readonly responses: ResponsesRepository,
    private readonly access: NamespaceAccess,
    private readonly experiments: Experiments,
  ) {}

  async createMetric(caller: Caller, body: unknown) {
    const request = parseBody(CreateFeedbackMetricRequest, body);
    const scope = await this.access.resolve(caller, request.namespace ?? caller.namespace);
    const metric = await this.rows.createMetric({ namespaceId: scope.id, name: request.name, type: request.type, optimize: request.optimize });
    if (!metric) throw ApiError.conflict(`Feedback metric '${request.name}' already exists in namespace ${scope.name}`);
    return metricView(metric, scope.name);
  }

  async metrics(caller: Caller, namespace?: string) {
    const scope = await this.access.resolve(caller, namespace ?? caller.namespace);
    return { object: 'list' as const, data: (await this.rows.metrics(scope.id)).map((m) => metricView(m, scope.name)) };
  }

  async give(caller: Caller, body: unknown) {
    const request = parseBody(CreateFeedbackRequest, body);
    const target = await this.target(caller, request.target_id);
    const metric = await this.rows.metric(target.namespaceId, request.metric);
    if (!metric) throw invalid([{ field: 'metric', message: `metric: no feedback metric '${request.metric}' in the namespace of ${request.target_id}; declare it with POST /api/feedback_metrics` }]);
    if (metric.type === 'boolean' && typeof request.value !== 'boolean') throw invalid([{ field: 'value', message: `value must be true or false: '${metric.name}' is a boolean metric` }]);
    if (metric.type === 'float' && typeof request.value !== 'number') throw invalid([{ field: 'value', message: `value must be a number: '${metric.name}' is a float metric` }]);
    const value = typeof request.value === 'boolean' ? Number(request.value) : request.value;
    const comment = request.comment ?? null;
    const row = await this.rows.add({ metricId: metric.id, targetId: request.target_id, completionId: target.completionId, value, comment, userId: caller.userId });
    // An adaptive experiment that answered it moves its weights before the caller hears back, so its next request sees them.
    if (target.completionId) await this.experiments.feedbackGiven(target.completionId);
    return feedbackView({ id: row.id, targetId: request.target_id, metric: metric.name, value, comment, createdAt: row.createdAt });
  }

  /** The feedback on one stored completion or response of the caller's. */
  async on(caller: Caller, targetId: unknown) {
    if (typeof targetId !== 'string') throw invalid([{ field: 'target_id', message: 'target_id must be a stored completion (chatcmpl-... or msg_...) or response (resp_...) id' }]);
    await this.target(caller, targetId);
    return { object: 'list' as const, data: (await this.rows.on(targetId)).map(feedbackView) };
  }

  /** The namespace of a target the caller may read; anything else, another namespace's included, is 404. */
  private async target(caller: Caller, id: string): Promise<{ namespaceId: string; completionId: string | null }> {
    if (id.startsWith('chatcmpl-') || id.startsWith('msg_')) {
      const row = await this.completions.readable(caller, id);
      return { namespaceId: row.namespaceId, completionId: row.id };
    }
    const namespaceId = id.startsWith('resp_') ? await this.responses.namespaceOf(id) : undefined;
    if (namespaceId === undefined || !(await this.access.canAccess(caller, namespaceId))) throw new ApiError('resource_not_found', `No stored completion or response found with id '${id}'`);
    return { namespaceId, completionId: null };
  }
}
