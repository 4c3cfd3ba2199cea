import { API_SCOPES } from '@atelier/contracts';
import { useMutation, useQueryClient } from '@tanstack/preact-query';
import { useState } from 'preact/hooks';
import { api } from '../api';
import { credits, percent, when } from '../format';
import { html } from '../html';
import { useApiKeys, type ApiKey, type Session } from '../queries';
import { ErrorNote, Loading } from './parts';

const SCOPES = API_SCOPES;

function CreateKey(props: { onCreated: (key: ApiKey & { api_key: string }) => void }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>([]);
  const [rpm, setRpm] = useState('');
  const [budget, setBudget] = useState('');
  const [period, setPeriod] = useState('month');
  const [expires, setExpires] = useState('');
  const create = useMutation({
    mutationFn: () =>
      api<ApiKey & { api_key: string }>('POST', '/api/api_keys', {
        name,
        ...(scopes.length > 0 && { scopes }),
        ...(rpm && { limits: { rpm: Number(rpm) } }),
        ...(budget && { budget: { max_spend: budget, period } }),
        ...(expires && { expires_at: new Date(expires).toISOString() }),
      }),
    onSuccess: (key) => props.onCreated(key),
  });
  const toggle = (scope: string) => setScopes(scopes.includes(scope) ? scopes.filter((s) => s !== scope) : [...scopes, scope]);
  return html`<form class="card" onSubmit=${(e: Event) => (e.preventDefault(), create.mutate())}>
    <h3>New key</h3>
    <label for="key-name">Name</label>
      <input id="key-name" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} required />
    <fieldset><legend>Scopes (none: everything, key management included)</legend>
      ${SCOPES.map((s) => html`<label class="inline"><input type="checkbox" checked=${scopes.includes(s)} onChange=${() => toggle(s)} /> ${s}</label>`)}
    </fieldset>
    <label for="key-rpm">Requests per minute</label>
      <input id="key-rpm" type="number" min="1" value=${rpm} onInput=${(e: Event) => setRpm((e.target as HTMLInputElement).value)} />
    <label for="key-budget">Budget (credits)</label>
      <input id="key-budget" inputmode="decimal" value=${budget} onInput=${(e: Event) => setBudget((e.target as HTMLInputElement).value)} />
    <label for="key-period">Budget period</label>
      <select id="key-period" value=${period} onChange=${(e: Event) => setPeriod((e.target as HTMLSelectElement).value)}>
        <option value="day">day</option><option value="month">month</option><option value="total">total</option>
      </select>
    <label for="key-expires">Expires</label>
      <input id="key-expires" type="date" value=${expires} onInput=${(e: Event) => setExpires((e.target as HTMLInputElement).value)} />
    <button type="submit" disabled=${create.isPending}>Create key</button>
    <${ErrorNote} error=${create.error} />
  </form>`;
}

function NewSecret(props: { created: ApiKey & { api_key: string }; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  return html`<section class="card notice" role="status">
    <h3>Key ${props.created.prefix} created</h3>
    <p>Copy it now: it is shown only once.</p>
    <code class="secret" data-testid="new-key">${props.created.api_key}</code>
    <div class="toolbar">
      <button type="button" onClick=${() => navigator.clipboard?.writeText(props.created.api_key).then(() => setCopied(true))}>${copied ? 'Copied' : 'Copy'}</button>
      <button type="button" onClick=${props.onDone}>Done</button>
    </div>
  </section>`;
}

export function KeysPage(props: { session: Session }) {
  // A key with scopes cannot manage keys (the API answers 403): nothing to show.
  const allowed = props.session.scopes.length === 0 && props.session.key_prefix !== null;
  const client = useQueryClient();
  const keys = useApiKeys(allowed);
  const [created, setCreated] = useState<ApiKey & { api_key: string }>();
  const revoke = useMutation({ mutationFn: (prefix: string) => api('DELETE', `/api/api_keys/${prefix}`), onSuccess: () => client.invalidateQueries({ queryKey: ['api_keys'] }) });
  if (!allowed) return html`<div><h2>API keys</h2><p>This session's key is limited to ${props.session.scopes.join(', ') || 'nothing'}; managing keys needs a key without scopes.</p></div>`;
  return html`<div>
    <h2>API keys</h2>
    ${created && html`<${NewSecret} created=${created} onDone=${() => setCreated(undefined)} />`}
    <${CreateKey} onCreated=${(k: ApiKey & { api_key: string }) => (setCreated(k), client.invalidateQueries({ queryKey: ['api_keys'] }))} />
    <${ErrorNote} error=${keys.error ?? revoke.error} />
    ${keys.isLoading && html`<${Loading} />`}
    <div class="card table-scroll" tabindex="0" role="region" aria-label="API keys"><table>
      <thead><tr><th scope="col">Key</th><th scope="col">Scopes</th><th scope="col">Limits</th><th scope="col">Budget</th><th scope="col">Expires</th><th scope="col">Last used</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${keys.data?.data.map(
          (k) => html`<tr data-testid="key-row" data-prefix=${k.prefix}>
            <td><strong>${k.name ?? '(unnamed)'}</strong><br /><code>${k.prefix}</code>${k.prefix === props.session.key_prefix ? ' (this session)' : ''}</td>
            <td>${k.scopes?.join(', ') ?? 'all'}</td>
            <td>${k.limits ? Object.entries(k.limits).map(([n, v]) => `${n} ${v}`).join(', ') : '–'}</td>
            <td>${k.budget
              ? html`<div class="meter" role="meter" aria-valuemin="0" aria-valuemax=${Number(k.budget.max_spend)} aria-valuenow=${Number(k.budget.spent)} aria-label="Budget spent">
                    <span style=${{ width: `${percent(Number(k.budget.spent), Number(k.budget.max_spend))}%` }}></span>
                  </div>
                  ${credits(k.budget.spent)} / ${credits(k.budget.max_spend)} per ${k.budget.period}`
              : '–'}</td>
            <td>${when(k.expires_at)}</td>
            <td>${when(k.last_used_at)}</td>
            <td>${k.prefix !== props.session.key_prefix && html`<button type="button" onClick=${() => confirm(`Revoke ${k.prefix}?`) && revoke.mutate(k.prefix)}>Revoke</button>`}</td>
          </tr>`,
        )}
      </tbody>
    </table></div>
  </div>`;
}
