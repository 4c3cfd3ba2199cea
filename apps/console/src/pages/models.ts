import { html } from '../html';
import { useModels } from '../queries';
import { ErrorNote, Loading } from './parts';

export function ModelsPage() {
  const models = useModels();
  return html`<div>
    <h2>Models</h2>
    <${ErrorNote} error=${models.error} />
    ${models.isLoading && html`<${Loading} />`}
    <ul class="cards">
      ${models.data?.data.map((m) => {
        const params = Object.entries((m.request_schema as { properties?: Record<string, { title?: string; description?: string; default?: unknown }> } | undefined)?.properties ?? {});
        return html`<li class="card">
          <h3>${m.id}</h3>
          <p class="muted">${String(m.description ?? '')}</p>
          <p><strong>Endpoint</strong> <code>${String(m.endpoint ?? '')}</code></p>
          <p><strong>Pricing</strong> ${Object.entries((m.pricing as Record<string, string>) ?? {}).map(([k, v]) => `${k.replace(/_/g, ' ')}: ${v}`).join(' · ')}</p>
          <details><summary>${params.length} parameters</summary>
            <dl>${params.map(([name, p]) => html`<dt>${p.title ?? name} <code>${name}</code></dt><dd>${p.description ?? ''}${p.default !== undefined ? ` (default ${JSON.stringify(p.default)})` : ''}</dd>`)}</dl>
          </details>
        </li>`;
      })}
    </ul>
  </div>`;
}
