import { useMutation, useQueryClient } from '@tanstack/preact-query';
import { useState } from 'preact/hooks';
import { api } from '../api';
import { credits, when } from '../format';
import { html } from '../html';
import { useGeneration, useGenerations, useWebhookDeliveries, type Generation } from '../queries';
import { ErrorNote, Loading, StatusBadge } from './parts';

const FILTERS = [
  { id: 'all', label: 'All' },
  { id: 'queued,processing', label: 'Active' },
  { id: 'succeeded', label: 'Succeeded' },
  { id: 'failed', label: 'Failed' },
];
/** The submitted parameters a re-run sends again (the record echoes every one). */
const RECORD_FIELDS = new Set(['generation_id', 'model_name', 'media_type', 'status', 'result_url', 'error_message', 'enqueued_at', 'started_at', 'completed_at', 'queue_position', 'progress', 'cost', 'target_namespace', 'target_repo', 'target_directory']);

function Preview(props: { g: Generation }) {
  const { g } = props;
  if (g.status === 'succeeded' && g.result_url)
    return g.media_type === 'video'
      ? html`<video src=${g.result_url} preload="metadata" muted playsinline aria-label=${`Video: ${g.prompt}`}></video>`
      : html`<img src=${g.result_url} loading="lazy" alt=${g.prompt} data-testid="thumbnail" />`;
  if (g.status === 'queued') return html`<div class="placeholder">queued${g.queue_position !== null ? html`<br />${g.queue_position} ahead` : ''}</div>`;
  if (g.status === 'processing')
    return html`<div class="placeholder">
      <progress max="1" value=${g.progress ?? undefined} aria-label="Progress"></progress>
      ${g.progress !== null ? `${Math.round(g.progress * 100)} %` : 'running'}
    </div>`;
  return html`<div class="placeholder">${g.status}</div>`;
}

function Drawer(props: { id: string; onClose: () => void }) {
  const client = useQueryClient();
  const g = useGeneration(props.id);
  const deliveries = useWebhookDeliveries(props.id);
  const refresh = () => client.invalidateQueries({ queryKey: ['generations'] });
  const cancel = useMutation({ mutationFn: () => api('DELETE', `/api/ai/queue/${props.id}`), onSuccess: () => (refresh(), g.refetch()) });
  const rerun = useMutation({
    mutationFn: (record: Generation) =>
      api('POST', '/api/ai/queue', { model: record.model_name, ...Object.fromEntries(Object.entries(record).filter(([k, v]) => !RECORD_FIELDS.has(k) && v !== null)) }),
    onSuccess: refresh,
  });
  const record = g.data;
  const params = record ? Object.entries(record).filter(([k, v]) => !RECORD_FIELDS.has(k) && v !== null) : [];
  return html`<aside class="drawer" role="dialog" aria-modal="false" aria-labelledby="drawer-title">
    <div class="drawer-head">
      <h3 id="drawer-title">Generation</h3>
      <button type="button" onClick=${props.onClose}>Close</button>
    </div>
    <${ErrorNote} error=${g.error ?? cancel.error ?? rerun.error} />
    ${!record
      ? html`<${Loading} />`
      : html`<div>
          <${Preview} g=${record} />
          <dl>
            <dt>Status</dt><dd><${StatusBadge} status=${record.status} /></dd>
            <dt>Model</dt><dd>${record.model_name}</dd>
            <dt>Cost</dt><dd>${credits(record.cost)}</dd>
            <dt>Enqueued</dt><dd>${when(record.enqueued_at)}</dd>
            <dt>Completed</dt><dd>${when(record.completed_at)}</dd>
            ${record.error_message && html`<dt>Error</dt><dd class="error">${record.error_message}</dd>`}
            ${record.result_url && html`<dt>Result</dt><dd><a href=${record.result_url} target="_blank" rel="noopener">Open the file</a></dd>`}
          </dl>
          <h4>Parameters</h4>
          <dl>${params.map(([k, v]) => html`<dt>${k}</dt><dd>${typeof v === 'object' ? JSON.stringify(v) : String(v)}</dd>`)}</dl>
          <h4>Webhook deliveries</h4>
          ${(deliveries.data?.deliveries.length ?? 0) === 0
            ? html`<p class="muted">None.</p>`
            : html`<ul>${deliveries.data!.deliveries.map((d) => html`<li>${String(d.type)} #${String(d.attempt)}: ${String(d.status_code ?? d.error)} at ${String(d.at)}</li>`)}</ul>`}
          <div class="toolbar">
            ${(record.status === 'queued' || record.status === 'processing') && html`<button type="button" onClick=${() => cancel.mutate()} disabled=${cancel.isPending}>Cancel</button>`}
            <button type="button" onClick=${() => rerun.mutate(record)} disabled=${rerun.isPending}>Run again</button>
          </div>
        </div>`}
  </aside>`;
}

export function GenerationsPage() {
  const [filter, setFilter] = useState(FILTERS[0]);
  const [offset, setOffset] = useState(0);
  const [open, setOpen] = useState<string>();
  // One paged request; while something is active it is asked again every 2 s for queue_position
  // and progress (the event stream carries completions only).
  const list = useGenerations(filter.id, offset, {
    refetchInterval: (q) => (q.state.data?.generations.some((g) => g.status === 'queued' || g.status === 'processing') ? 2000 : false),
  });
  const page = list.data;
  return html`<div>
    <h2>Generations</h2>
    <div class="toolbar" role="group" aria-label="Status filter">
      ${FILTERS.map((f) => html`<button type="button" aria-pressed=${f.id === filter.id} onClick=${() => (setFilter(f), setOffset(0))}>${f.label}</button>`)}
    </div>
    <${ErrorNote} error=${list.error} />
    ${list.isLoading && html`<${Loading} />`}
    ${page && page.generations.length === 0 && html`<p class="muted">No generations yet. Enqueue one in the Playground or with POST /api/ai/queue.</p>`}
    <ul class="gallery">
      ${page?.generations.map(
        (g) => html`<li class="tile" data-testid="generation" data-id=${g.generation_id} data-status=${g.status}>
          <button type="button" class="tile-button" onClick=${() => setOpen(g.generation_id)} aria-label=${`Details of ${g.prompt}`}>
            <${Preview} g=${g} />
          </button>
          <div class="tile-meta">
            <${StatusBadge} status=${g.status} />
            <span class="tile-prompt" title=${g.prompt}>${g.prompt}</span>
            <span>${g.model_name}</span>
            <span class="muted">${g.cost !== null ? `${credits(g.cost)} cr` : ''} · ${when(g.enqueued_at)}</span>
          </div>
        </li>`,
      )}
    </ul>
    ${page &&
    page.count > page.limit &&
    html`<div class="toolbar">
      <button type="button" disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - page.limit))}>Newer</button>
      <span>${offset + 1}–${Math.min(offset + page.limit, page.count)} of ${page.count}</span>
      <button type="button" disabled=${offset + page.limit >= page.count} onClick=${() => setOffset(offset + page.limit)}>Older</button>
    </div>`}
    ${open && html`<${Drawer} id=${open} onClose=${() => setOpen(undefined)} />`}
  </div>`;
}
