import { Injectable } from '@nestjs/common';
import { ApiError } from '@atelier/contracts';
import type { RepositoryRecord } from '@atelier/repos';
import { FineTuneRuns } from './fine-tune-runs.service';
import { FineTunesRepository } from './fine-tunes.repository';
import { parseResource } from './fine-tune-request';
import { intParam } from './fine-tunes.service';

const unix = (d: Date) => Math.floor(d.getTime() / 1000);
const METRIC_NAMES = ['loss', 'grad_norm', 'learning_rate', 'epoch', 'mean_token_accuracy'] as const;

/** What a run reported, for its owner: logs, checkpoints and the trainer's latest status. */
@Injectable()
export class FineTuneReports {
  constructor(
    private readonly fineTunes: FineTunesRepository,
    private readonly runs: FineTuneRuns,
  ) {}

  /** GET .../logs: every log, metrics and status event in order; `after` (an id) pages on. */
  async logs(repo: RepositoryRecord, id: string, query: { after?: unknown; limit?: unknown; type?: unknown }) {
    const ft = await this.runs.find(repo, id);
    const after = intParam(query.after, 'after', 0, 0, Number.MAX_SAFE_INTEGER);
    const limit = intParam(query.limit, 'limit', 500, 1, 5000);
    const type = query.type === undefined || query.type === '' ? undefined : String(query.type);
    if (type !== undefined && !['log', 'metrics', 'status', 'checkpoint'].includes(type)) throw ApiError.badRequest('type must be one of log, metrics, status, checkpoint');
    const rows = await this.fineTunes.logs(ft.id, after, type, limit);
    return {
      fine_tune_id: ft.id,
      logs: rows.map((r) => ({ id: Number(r.id), type: r.type, attempt: r.attempt, created_at: unix(r.createdAt), ...(r.data as Record<string, unknown>) })),
      next_after: rows.length === limit ? Number(rows[rows.length - 1].id) : null,
    };
  }

  /** GET .../checkpoints, in the hub's shape: sealed checkpoints by step, with the model each one became. */
  async checkpoints(repo: RepositoryRecord, id: string) {
    const ft = await this.runs.find(repo, id);
    const [checkpoints, files, models] = await this.fineTunes.checkpoints(ft.id);
    const resource = parseResource(ft.resource);
    return {
      fine_tune_id: ft.id,
      branch: typeof resource === 'string' ? null : resource.branch,
      total_checkpoints: checkpoints.length,
      checkpoints: checkpoints.map((c) => {
        const reported = c.metrics as Record<string, unknown>;
        const model = models.find((m) => m.step === c.step);
        return {
          step: c.step,
          path: `fine-tunes/${ft.id}/checkpoints/${c.step}`,
          files: files.filter((f) => f.step === c.step).map((f) => f.path).sort(),
          size_bytes: Number(c.sizeBytes),
          created_at: unix(c.createdAt),
          metrics: Object.fromEntries(METRIC_NAMES.map((k) => [k, typeof reported[k] === 'number' ? reported[k] : null])),
          model_name: checkpointModelName(ft.name, c.step),
          model_id: model?.id ?? null,
          deployment_status: model?.status ?? 'not_deployed',
        };
      }),
    };
  }

  /** GET .../train_status: the state, the lease and what the trainer said last. */
  async trainStatus(repo: RepositoryRecord, id: string) {
    const ft = await this.runs.find(repo, id);
    const [lease, phase, metrics] = await Promise.all([
      this.fineTunes.lastLease(ft.id),
      this.fineTunes.lastLog(ft.id, 'status'),
      this.fineTunes.lastLog(ft.id, 'metrics'),
    ]);
    const last = metrics?.data as Record<string, unknown> | undefined;
    return {
      fine_tune_id: ft.id,
      // Not `status`: that is the envelope's success field.
      fine_tune_status: ft.state,
      attempt: ft.attempt,
      stop_requested: ft.stopRequestedAt !== null,
      phase: (phase?.data as { phase?: string } | undefined)?.phase ?? null,
      step: typeof last?.step === 'number' ? last.step : null,
      metrics: last ? Object.fromEntries(Object.entries(last).filter(([k]) => k !== 'seq')) : null,
      lease: lease ? { id: lease.id, trainer: lease.trainer.name, attempt: lease.attempt, state: lease.state, heartbeat_at: unix(lease.heartbeatAt) } : null,
    };
  }
}

/**
 * `<fine_tune_name>-step-<step>`: the model a deployed checkpoint becomes. The name is a model id,
 * used in URLs and by SDKs: anything but letters, digits, `.`, `_` and `-` becomes `-`.
 */
export function checkpointModelName(fineTuneName: string, step: number): string {
  const safe = fineTuneName.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^-+|-+$/g, '') || 'fine-tune';
  return `${safe}-step-${step}`;
}
