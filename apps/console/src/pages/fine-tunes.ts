import { useMutation, useQueryClient } from '@tanstack/preact-query';
import { useState } from 'preact/hooks';
import { api } from '../api';
import { TimeChart } from '../chart';
import { when } from '../format';
import { html } from '../html';
import { fineTunePath, useBaseModels, useCheckpoints, useFineTuneLogs, useFineTunes, type FineTune } from '../queries';
import { ErrorNote, Loading, StatusBadge } from './parts';

const ACTIVE = new Set(['created', 'tokenizing', 'tokenized', 'enqueued', 'running']);

/** Loss by step: the trainer's metrics events, and the checkpoints' metrics where no event covers a step. */
function lossCurve(logs: { type: string; [k: string]: unknown }[], checkpoints: { step: number; metrics: { loss?: number } | null }[]) {
  const byStep = new Map<number, number>();
  for (const c of checkpoints) if (typeof c.metrics?.loss === 'number') byStep.set(c.step, c.metrics.loss);
  for (const l of logs) if (l.type === 'metrics' && typeof l.step === 'number' && typeof l.loss === 'number') byStep.set(l.step, l.loss);
  const steps = [...byStep.keys()].sort((a, b) => a - b);
  return { xs: steps, loss: steps.map((s) => byStep.get(s)!) };
}

function Detail(props: { ft: FineTune }) {
  const client = useQueryClient();
  const live = ACTIVE.has(props.ft.status) ? 3000 : false;
  const checkpoints = useCheckpoints(props.ft, { refetchInterval: live });
  const logs = useFineTuneLogs(props.ft, { refetchInterval: live });
  const deploy = useMutation({
    mutationFn: (step: number) => api('POST', `${fineTunePath(props.ft)}/checkpoints/${step}/deploy`, { deployment_type: 'fast' }),
    onSuccess: () => (client.invalidateQueries({ queryKey: ['fine_tunes'] }), client.invalidateQueries({ queryKey: ['checkpoints'] }), client.invalidateQueries({ queryKey: ['models'] })),
  });
  const action = useMutation({
    mutationFn: (what: 'tokenize' | 'run' | 'stop') => api('POST', `${fineTunePath(props.ft)}/${what === 'tokenize' ? 'tokenize' : `actions/${what}`}`),
    onSuccess: () => client.invalidateQueries({ queryKey: ['fine_tunes'] }),
  });
  const curve = lossCurve(logs.data?.logs ?? [], checkpoints.data?.checkpoints ?? []);
  const messages = (logs.data?.logs ?? []).filter((l) => l.type === 'log' || l.type === 'status').slice(-50);
  return html`<section class="card wide" data-testid="fine-tune-detail">
    <h3>${props.ft.name} <${StatusBadge} status=${props.ft.status} /></h3>
    <p class="muted">${props.ft.namespace}/${props.ft.repo_name} · ${props.ft.base_model} · updated ${when(props.ft.updated_at)}</p>
    ${props.ft.error && html`<p class="error">${props.ft.error}</p>`}
    <div class="toolbar">
      ${props.ft.status === 'created' && html`<button type="button" onClick=${() => action.mutate('tokenize')}>Tokenize</button>`}
      ${(props.ft.status === 'created' || props.ft.status === 'tokenized') && html`<button type="button" onClick=${() => action.mutate('run')}>Train</button>`}
      ${(props.ft.status === 'enqueued' || props.ft.status === 'running') && html`<button type="button" onClick=${() => action.mutate('stop')}>Stop</button>`}
    </div>
    <${ErrorNote} error=${action.error ?? deploy.error ?? checkpoints.error ?? logs.error} />
    ${curve.xs.length > 0
      ? html`<${TimeChart} title="Training loss by step" xs=${curve.xs} series=${[{ label: 'loss', values: curve.loss }]} time=${false} xLabel="step" testId="loss-chart" />`
      : html`<p class="muted">No loss reported yet.</p>`}
    <h4>Checkpoints</h4>
    ${(checkpoints.data?.checkpoints.length ?? 0) === 0
      ? html`<p class="muted">None yet.</p>`
      : html`<div class="table-scroll" tabindex="0" role="region" aria-label="Checkpoints"><table>
          <thead><tr><th scope="col">Step</th><th scope="col">Loss</th><th scope="col">Saved</th><th scope="col">Model</th><th scope="col"><span class="sr-only">Deploy</span></th></tr></thead>
          <tbody>${checkpoints.data!.checkpoints.map(
            (c) => html`<tr data-testid="checkpoint" data-step=${c.step}>
              <td class="num">${c.step}</td><td class="num">${c.metrics?.loss ?? '–'}</td><td>${when(c.created_at)}</td>
              <td>${c.deployment_status === 'deployed' ? html`<code>${c.model_name}</code>` : '–'}</td>
              <td>${c.deployment_status !== 'deployed' && html`<button type="button" onClick=${() => deploy.mutate(c.step)} disabled=${deploy.isPending}>Deploy</button>`}</td>
            </tr>`,
          )}</tbody>
        </table></div>`}
    <h4>Logs</h4>
    <pre class="logs" tabindex="0" aria-label="Logs">${messages.map((l) => `${when(l.created_at)} ${l.type === 'status' ? `status: ${String(l.phase ?? '')}` : String(l.line ?? l.message ?? '')}`).join('\n') || 'No logs yet.'}</pre>
  </section>`;
}

function CreateFineTune() {
  const client = useQueryClient();
  const base = useBaseModels();
  const scripts = (base.data as { data?: { script_type: string; base_models: string[]; example: Record<string, unknown> }[] } | undefined)?.data ?? [];
  const [repo, setRepo] = useState('');
  const [resource, setResource] = useState('');
  const [script, setScript] = useState('');
  const [model, setModel] = useState('');
  const chosen = scripts.find((s) => s.script_type === (script || scripts[0]?.script_type));
  const create = useMutation({
    mutationFn: () => {
      const [namespace, name] = repo.split('/');
      return api('POST', `/api/repos/${encodeURIComponent(namespace)}/${encodeURIComponent(name ?? '')}/fine_tunes`, {
        ...chosen?.example,
        name: `ft-${Date.now().toString(36)}`,
        resource,
        script_type: chosen?.script_type,
        base_model: model || chosen?.base_models[0],
      });
    },
    onSuccess: () => client.invalidateQueries({ queryKey: ['fine_tunes'] }),
  });
  return html`<form class="card" onSubmit=${(e: Event) => (e.preventDefault(), create.mutate())}>
    <h3>New fine-tune</h3>
    <label for="ft-repo">Repository (namespace/name)</label>
      <input id="ft-repo" value=${repo} onInput=${(e: Event) => setRepo((e.target as HTMLInputElement).value)} required />
    <label for="ft-resource">Dataset file (Parquet path in the repository)</label>
      <input id="ft-resource" value=${resource} onInput=${(e: Event) => setResource((e.target as HTMLInputElement).value)} required />
    <label for="ft-script">Script type</label>
      <select id="ft-script" value=${chosen?.script_type} onChange=${(e: Event) => (setScript((e.target as HTMLSelectElement).value), setModel(''))}>
        ${scripts.map((s) => html`<option value=${s.script_type}>${s.script_type}</option>`)}
      </select>
    <label for="ft-model">Base model</label>
      <select id="ft-model" value=${model || chosen?.base_models[0]} onChange=${(e: Event) => setModel((e.target as HTMLSelectElement).value)}>
        ${chosen?.base_models.map((m) => html`<option value=${m}>${m}</option>`)}
      </select>
    <button type="submit" disabled=${create.isPending}>Create</button>
    <${ErrorNote} error=${base.error ?? create.error} />
  </form>`;
}

export function FineTunesPage() {
  const list = useFineTunes({ refetchInterval: (q) => (q.state.data?.fine_tunes.some((f) => ACTIVE.has(f.status)) ? 3000 : false) });
  const [open, setOpen] = useState<string>();
  const selected = list.data?.fine_tunes.find((f) => f.id === open);
  return html`<div>
    <h2>Fine-tunes</h2>
    <${ErrorNote} error=${list.error} />
    ${list.isLoading && html`<${Loading} />`}
    <div class="card table-scroll" tabindex="0" role="region" aria-label="Fine-tunes"><table>
      <thead><tr><th scope="col">Name</th><th scope="col">Repository</th><th scope="col">Base model</th><th scope="col">Status</th><th scope="col">Updated</th></tr></thead>
      <tbody>${list.data?.fine_tunes.map(
        (f) => html`<tr data-testid="fine-tune" data-id=${f.id}>
          <td><button type="button" class="link" onClick=${() => setOpen(f.id)}>${f.name}</button></td>
          <td>${f.namespace}/${f.repo_name}</td><td>${f.base_model}</td><td><${StatusBadge} status=${f.status} /></td><td>${when(f.updated_at)}</td>
        </tr>`,
      )}</tbody>
    </table></div>
    ${selected && html`<${Detail} ft=${selected} />`}
    <${CreateFineTune} />
  </div>`;
}
