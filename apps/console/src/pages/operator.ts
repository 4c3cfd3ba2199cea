import { useMutation, useQueryClient } from '@tanstack/preact-query';
import { useState } from 'preact/hooks';
import { api } from '../api';
import { credits, when } from '../format';
import { html } from '../html';
import { useAdminUsage, useNamespace, useTrainers, type Session } from '../queries';
import { ErrorNote } from './parts';

const LIMITS = ['rpm', 'read_rpm', 'tpm', 'max_concurrent'] as const;

function NamespacePanel(props: { name: string }) {
  const client = useQueryClient();
  const ns = useNamespace(props.name);
  const [grant, setGrant] = useState('');
  const [limits, setLimits] = useState<Record<string, string>>({});
  const refresh = () => client.invalidateQueries({ queryKey: ['admin_namespace', props.name] });
  const addCredits = useMutation({ mutationFn: () => api('POST', `/api/admin/namespaces/${encodeURIComponent(props.name)}/credits`, { amount: grant }), onSuccess: () => (setGrant(''), refresh()) });
  const saveLimits = useMutation({
    mutationFn: () =>
      api('PUT', `/api/admin/namespaces/${encodeURIComponent(props.name)}/limits`, Object.fromEntries(Object.entries(limits).map(([k, v]) => [k, v === '' ? null : Number(v)]))),
    onSuccess: refresh,
  });
  const data = ns.data as { namespace: string; type: string; credits: string; reserved: string } | undefined;
  return html`<section class="card wide" data-testid="namespace-panel">
    <h3>${props.name}</h3>
    <${ErrorNote} error=${ns.error ?? addCredits.error ?? saveLimits.error} />
    ${data && html`<p data-testid="namespace-balance">${data.type} · ${credits(data.credits)} credits (${credits(data.reserved)} reserved)</p>`}
    <form onSubmit=${(e: Event) => (e.preventDefault(), addCredits.mutate())}>
      <label for="grant">Add credits (negative to take away)</label>
      <input id="grant" inputmode="decimal" value=${grant} onInput=${(e: Event) => setGrant((e.target as HTMLInputElement).value)} required />
      <button type="submit">Apply</button>
    </form>
    <form onSubmit=${(e: Event) => (e.preventDefault(), saveLimits.mutate())}>
      <fieldset><legend>Limits for every key of the namespace together (empty: no limit)</legend>
        ${LIMITS.map((l) => html`<label for=${`limit-${l}`}>${l}</label><input id=${`limit-${l}`} type="number" min="1" value=${limits[l] ?? ''} onInput=${(e: Event) => setLimits({ ...limits, [l]: (e.target as HTMLInputElement).value })} />`)}
      </fieldset>
      <button type="submit">Save limits</button>
    </form>
  </section>`;
}

export function OperatorPage(props: { session: Session }) {
  const [name, setName] = useState('');
  const [open, setOpen] = useState<string>();
  const month = new Date(Date.now() - 30 * 86_400_000).toISOString().slice(0, 10);
  const usage = useAdminUsage(month, props.session.operator);
  const trainers = useTrainers(props.session.operator);
  if (!props.session.operator) return html`<div><h2>Operator</h2><p>Operator pages need a console session opened with the admin token.</p></div>`;
  const list = (trainers.data as { trainers?: { id: string; name: string; base_models: string[]; created_at: number }[] } | undefined)?.trainers ?? [];
  return html`<div>
    <h2>Operator</h2>
    <section class="card">
      <h3>Namespaces by spend, last 30 days</h3>
      <${ErrorNote} error=${usage.error} />
      <table>
        <thead><tr><th scope="col">Namespace</th><th scope="col">Requests</th><th scope="col">Credits</th></tr></thead>
        <tbody>${usage.data?.rows.map((r) => html`<tr><td><button type="button" class="link" onClick=${() => setOpen(r.group ?? undefined)}>${r.group}</button></td><td class="num">${r.requests}</td><td class="num">${credits(r.cost)}</td></tr>`)}</tbody>
      </table>
      <form onSubmit=${(e: Event) => (e.preventDefault(), setOpen(name))}>
        <label for="ns-name">Namespace</label>
      <input id="ns-name" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} required />
        <button type="submit">Open</button>
      </form>
    </section>
    ${open && html`<${NamespacePanel} name=${open} />`}
    <section class="card">
      <h3>Trainers</h3>
      <${ErrorNote} error=${trainers.error} />
      <ul>${list.map((t) => html`<li><strong>${t.name}</strong> (${t.base_models.join(', ')}), since ${when(t.created_at)}</li>`)}</ul>
      ${list.length === 0 && html`<p class="muted">No trainer registered.</p>`}
    </section>
  </div>`;
}
