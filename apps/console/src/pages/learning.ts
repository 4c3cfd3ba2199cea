import { useMutation, useQueryClient } from '@tanstack/preact-query';
import { useState } from 'preact/hooks';
import { api } from '../api';
import { TimeChart } from '../chart';
import { credits, when } from '../format';
import { html } from '../html';
import { useExperiment, useExperiments, useFeedbackMetrics, useStoredCompletions, type ExperimentDetail, type Session } from '../queries';
import { ErrorNote, Loading, StatusBadge } from './parts';

const text = (value: unknown) => (typeof value === 'string' ? value : '');
const input = (set: (v: string) => void) => (e: Event) => set((e.target as HTMLInputElement).value);

/** The namespace's stored completions with their feedback, filtered by a metric; the good ones exported to a repo. */
function StoredCompletions(props: { session: Session }) {
  const [metric, setMetric] = useState('');
  const [minValue, setMinValue] = useState('');
  const [repo, setRepo] = useState('');
  const [path, setPath] = useState('data/traffic.parquet');
  const metrics = useFeedbackMetrics();
  const completions = useStoredCompletions(metric, minValue);
  const exported = useMutation({
    mutationFn: () =>
      api<{ status: string; id?: string; rows: number; commit?: { id?: string; message?: string } | null }>('POST', '/api/ai/chat/completions/export', {
        namespace: props.session.namespace,
        repo,
        path,
        ...(metric && { filter: { metric, ...(minValue && { min_value: Number(minValue) }) } }),
      }),
  });
  return html`<section aria-labelledby="stored-heading">
    <h3 id="stored-heading">Stored completions</h3>
    <form class="toolbar" onSubmit=${(e: Event) => e.preventDefault()}>
      <label for="stored-metric">Metric</label>
      <select id="stored-metric" value=${metric} onChange=${input(setMetric)}>
        <option value="">any</option>
        ${metrics.data?.data.map((m) => html`<option value=${m.name}>${m.name} (${m.type})</option>`)}
      </select>
      <label for="stored-min">At least</label>
      <input id="stored-min" type="number" step="any" value=${minValue} disabled=${!metric} onInput=${input(setMinValue)} />
    </form>
    <${ErrorNote} error=${completions.error} />
    ${completions.isLoading && html`<${Loading} />`}
    <div class="card table-scroll" tabindex="0" role="region" aria-label="Stored completions"><table>
      <thead><tr><th scope="col">Stored</th><th scope="col">Model</th><th scope="col">Answer</th><th scope="col">Metadata</th><th scope="col">Feedback</th></tr></thead>
      <tbody>
        ${completions.data?.data.map(
          (c) => html`<tr data-testid="stored-completion" data-id=${c.id}>
            <td>${when(c.created)}<br /><code>${c.id}</code></td>
            <td>${c.model}</td>
            <td>${text(c.choices[0]?.message?.content).slice(0, 160)}</td>
            <td>${Object.entries(c.metadata).map(([k, v]) => `${k}=${v}`).join(', ') || '–'}</td>
            <td>${c.feedback.length === 0 ? '–' : c.feedback.map((f) => html`<span class="badge">${f.metric} ${f.value}</span> `)}</td>
          </tr>`,
        )}
      </tbody>
    </table></div>
    ${completions.data?.data.length === 0 && html`<p class="muted">Nothing stored yet: send chat completions with <code>store: true</code>, or ask the operator for a capture rate.</p>`}
    <form class="card" onSubmit=${(e: Event) => (e.preventDefault(), exported.mutate())}>
      <h3>Export as a dataset</h3>
      <p class="muted">The completions the filter above shows, as a Parquet file a <code>text_chat_messages</code> fine-tune trains on, committed to a repo of ${props.session.namespace}.</p>
      <label for="export-repo">Repository</label>
      <input id="export-repo" value=${repo} onInput=${input(setRepo)} required />
      <label for="export-path">Path</label>
      <input id="export-path" value=${path} onInput=${input(setPath)} required />
      <button type="submit" disabled=${exported.isPending}>Export</button>
      <${ErrorNote} error=${exported.error} />
      ${exported.data &&
      html`<p role="status" data-testid="export-result">
        ${exported.data.status === 'completed' ? `Exported ${exported.data.rows} completions: ${exported.data.commit?.message ?? ''}` : `Export ${exported.data.id} queued; it will show in your events when it ends.`}
      </p>`}
    </form>
  </section>`;
}

/** Weight per variant over the experiment's history, then its variants' figures side by side. */
function ExperimentView(props: { experiment: ExperimentDetail }) {
  const client = useQueryClient();
  const e = props.experiment;
  const promote = useMutation({
    mutationFn: (model: string) => api('POST', `/api/ai/experiments/${encodeURIComponent(e.name)}/promote`, { model }),
    onSuccess: () => client.invalidateQueries({ queryKey: ['experiment', e.name] }),
  });
  // Each history entry holds every variant's weight from then on; now closes the line.
  const points = [...e.history.map((h) => ({ at: h.created_at, variants: h.variants })), { at: Math.max(e.updated_at, Math.floor(Date.now() / 1000)), variants: e.variants }];
  const series = e.variants.map((v) => ({ label: v.model, values: points.map((p) => p.variants.find((w) => w.model === v.model)?.weight ?? null) }));
  return html`<div class="card" data-testid="experiment-detail">
    <h3>${e.name} <${StatusBadge} status=${e.status} /></h3>
    <p class="muted">${e.mode}${e.metric ? ` on ${e.metric}` : ''}${e.sticky_by ? `, sticky by ${e.sticky_by}` : ''}${e.promoted_model ? `; promoted ${e.promoted_model}` : ''}</p>
    <${TimeChart} title="Weight per variant" xs=${points.map((p) => p.at)} series=${series} testId="experiment-chart" />
    <div class="table-scroll" tabindex="0" role="region" aria-label="Variants"><table>
      <thead><tr><th scope="col">Variant</th><th scope="col">Weight</th><th scope="col">Requests</th><th scope="col">p50 / p95 ms</th><th scope="col">Cost per request</th><th scope="col">${e.metric ?? 'Metric'} (95 % interval)</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${e.variants.map(
          (v) => html`<tr data-testid="variant" data-model=${v.model}>
            <td><strong>${v.model}</strong></td>
            <td>${v.weight}</td>
            <td>${v.requests}${v.failed > 0 ? ` (${v.failed} failed)` : ''}</td>
            <td>${v.latency_ms.p50 ?? '–'} / ${v.latency_ms.p95 ?? '–'}</td>
            <td>${credits(v.cost.per_request)}</td>
            <td>${v.metric?.mean == null ? '–' : `${v.metric.mean.toFixed(2)}${v.metric.ci95 ? ` [${v.metric.ci95[0]}, ${v.metric.ci95[1]}]` : ''} of ${v.metric.count}`}</td>
            <td>${e.status === 'running' && html`<button type="button" disabled=${promote.isPending} onClick=${() => confirm(`Send every request of ${e.name} to ${v.model}?`) && promote.mutate(v.model)}>Promote</button>`}</td>
          </tr>`,
        )}
      </tbody>
    </table></div>
    <${ErrorNote} error=${promote.error} />
  </div>`;
}

function Experiments() {
  const experiments = useExperiments();
  const [selected, setSelected] = useState<string>();
  const name = selected ?? experiments.data?.data[0]?.name;
  const detail = useExperiment(name);
  return html`<section aria-labelledby="experiments-heading">
    <h3 id="experiments-heading">Experiments</h3>
    <${ErrorNote} error=${experiments.error ?? detail.error} />
    ${experiments.data?.data.length === 0 && html`<p class="muted">No experiment yet: <code>POST /api/ai/experiments</code> splits a model name of yours between models.</p>`}
    <ul class="toolbar" role="list">
      ${experiments.data?.data.map((e) => html`<li><button type="button" aria-pressed=${e.name === name} onClick=${() => setSelected(e.name)}>${e.name}</button></li>`)}
    </ul>
    ${detail.data && html`<${ExperimentView} experiment=${detail.data} />`}
  </section>`;
}

export function LearningPage(props: { session: Session }) {
  return html`<div>
    <h2>Learning</h2>
    <${StoredCompletions} session=${props.session} />
    <${Experiments} />
  </div>`;
}
