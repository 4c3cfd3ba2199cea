import { useMutation } from '@tanstack/preact-query';
import { useState } from 'preact/hooks';
import { api, streamChat } from '../api';
import { html } from '../html';
import { useModels, type ModelSummary } from '../queries';
import { ErrorNote } from './parts';

interface ParamSchema {
  type?: string;
  title?: string;
  description?: string;
  minimum?: number;
  maximum?: number;
  default?: unknown;
  enum?: unknown[];
  renderType?: string;
  'x-order'?: number;
  basic?: boolean;
}

/** The model's parameter schema as a form: sliders where it says renderType slider, selects for enums. */
function ParameterForm(props: { schema: { properties?: Record<string, ParamSchema> } | undefined; values: Record<string, unknown>; onChange: (name: string, value: unknown) => void; skip: string[] }) {
  const entries = Object.entries(props.schema?.properties ?? {})
    .filter(([name, p]) => !props.skip.includes(name) && p.basic !== false && (p.type === 'number' || p.type === 'integer' || p.enum))
    .sort((a, b) => (a[1]['x-order'] ?? 99) - (b[1]['x-order'] ?? 99));
  return html`<fieldset class="params">
    <legend>Parameters</legend>
    ${entries.map(([name, p]) => {
      const id = `param-${name}`;
      const value = props.values[name] ?? p.default;
      if (p.enum)
        return html`<label for=${id}>${p.title ?? name}</label>
          <select id=${id} value=${String(value ?? '')} onChange=${(e: Event) => props.onChange(name, (e.target as HTMLSelectElement).value)}>
            ${p.enum.map((v) => html`<option value=${String(v)}>${String(v)}</option>`)}
          </select>`;
      const step = p.type === 'integer' ? 1 : ((p.maximum ?? 1) - (p.minimum ?? 0)) / 100;
      return html`<label for=${id}>${p.title ?? name}</label>${p.renderType === 'slider' && html` <output for=${id}>${String(value ?? '')}</output>`}
        <input id=${id} type=${p.renderType === 'slider' ? 'range' : 'number'} min=${p.minimum} max=${p.maximum} step=${step} value=${value as number}
          onInput=${(e: Event) => props.onChange(name, Number((e.target as HTMLInputElement).value))} />`;
    })}
  </fieldset>`;
}

function ChatPlayground(props: { models: ModelSummary[] }) {
  const [model, setModel] = useState(props.models[0]?.id ?? '');
  const schema = props.models.find((m) => m.id === model)?.request_schema as { properties?: Record<string, ParamSchema> } | undefined;
  const [params, setParams] = useState<Record<string, unknown>>({});
  const [prompt, setPrompt] = useState('');
  const [answer, setAnswer] = useState('');
  const send = useMutation({
    mutationFn: async () => {
      setAnswer('');
      await streamChat({ model, messages: [{ role: 'user', content: prompt }], ...params }, (text) => setAnswer((a) => a + text));
    },
  });
  return html`<section class="card wide">
    <h3>Chat</h3>
    <form onSubmit=${(e: Event) => (e.preventDefault(), send.mutate())}>
      <label for="chat-model">Model</label>
        <select id="chat-model" value=${model} onChange=${(e: Event) => (setModel((e.target as HTMLSelectElement).value), setParams({}))}>
          ${props.models.map((m) => html`<option value=${m.id}>${m.id}</option>`)}
        </select>
      <${ParameterForm} schema=${schema} values=${params} onChange=${(n: string, v: unknown) => setParams({ ...params, [n]: v })} skip=${[]} />
      <label for="chat-prompt">Message</label>
        <textarea id="chat-prompt" rows="3" value=${prompt} onInput=${(e: Event) => setPrompt((e.target as HTMLTextAreaElement).value)} required></textarea>
      <button type="submit" disabled=${send.isPending || !model}>${send.isPending ? 'Streaming…' : 'Send'}</button>
    </form>
    <${ErrorNote} error=${send.error} />
    <output class="answer" data-testid="chat-answer" aria-live="polite">${answer}</output>
  </section>`;
}

function MediaPlayground(props: { models: { id: string; endpoint: string }[] }) {
  const [model, setModel] = useState(props.models[0]?.id ?? '');
  const [prompt, setPrompt] = useState('');
  const chosen = props.models.find((m) => m.id === model);
  const video = chosen?.endpoint.includes('video') ?? false;
  const run = useMutation({
    mutationFn: () =>
      api<{ images?: { url?: string }[]; videos?: { url?: string }[] }>('POST', video ? '/api/ai/videos/generate' : '/api/ai/images/generate', video ? { model, prompt } : { model, prompt, width: 512, height: 512 }),
  });
  const url = run.data?.images?.[0]?.url ?? run.data?.videos?.[0]?.url;
  return html`<section class="card wide">
    <h3>Images and video</h3>
    <form onSubmit=${(e: Event) => (e.preventDefault(), run.mutate())}>
      <label for="media-model">Model</label>
        <select id="media-model" value=${model} onChange=${(e: Event) => setModel((e.target as HTMLSelectElement).value)}>
          ${props.models.map((m) => html`<option value=${m.id}>${m.id}</option>`)}
        </select>
      <label for="media-prompt">Prompt</label>
        <input id="media-prompt" value=${prompt} onInput=${(e: Event) => setPrompt((e.target as HTMLInputElement).value)} required />
      <button type="submit" disabled=${run.isPending || !model}>${run.isPending ? 'Generating…' : 'Generate'}</button>
    </form>
    <${ErrorNote} error=${run.error} />
    ${url && (video ? html`<video src=${url} controls aria-label="Generated video"></video>` : html`<img src=${url} alt=${prompt} class="result" data-testid="playground-image" />`)}
  </section>`;
}

export function PlaygroundPage() {
  const models = useModels();
  const all = models.data?.data ?? [];
  const chat = all.filter((m) => m.endpoint === '/chat/completions');
  const media = all.filter((m) => m.endpoint === '/images/generate' || m.endpoint === '/videos/generate').map((m) => ({ id: m.id, endpoint: m.endpoint as string }));
  return html`<div>
    <h2>Playground</h2>
    <${ErrorNote} error=${models.error} />
    ${models.data && html`<div class="row"><${ChatPlayground} models=${chat} /><${MediaPlayground} models=${media} /></div>`}
  </div>`;
}
