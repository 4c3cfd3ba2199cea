import { useMutation, useQueryClient } from '@tanstack/preact-query';
import { useState } from 'preact/hooks';
import { api } from '../api';
import { html } from '../html';
import { ErrorNote } from './parts';

/** The key goes to the gateway once, in this POST; the page keeps no copy (the form is cleared). */
export function SignInPage() {
  const client = useQueryClient();
  const [key, setKey] = useState('');
  const [admin, setAdmin] = useState('');
  const signIn = useMutation({
    mutationFn: () => api('POST', '/api/console/session', { ...(key && { api_key: key }), ...(admin && { admin_token: admin }) }),
    onSettled: () => (setKey(''), setAdmin('')),
    onSuccess: () => client.invalidateQueries(),
  });
  return html`<main class="sign-in" id="main">
    <h1>atelier console</h1>
    <form class="card" onSubmit=${(e: Event) => (e.preventDefault(), signIn.mutate())} autocomplete="off">
      <label for="api-key">API key</label>
      <input id="api-key" type="password" value=${key} onInput=${(e: Event) => setKey((e.target as HTMLInputElement).value)} />
      <label for="admin-token">Admin token (operators only, optional)</label>
      <input id="admin-token" type="password" value=${admin} onInput=${(e: Event) => setAdmin((e.target as HTMLInputElement).value)} />
      <button type="submit" disabled=${signIn.isPending || (!key && !admin)}>Sign in</button>
      <${ErrorNote} error=${signIn.error} />
      <p class="muted">The key is exchanged for a session cookie that no script can read; sign out ends the session.</p>
    </form>
  </main>`;
}
