import { QueryClient, QueryClientProvider } from '@tanstack/preact-query';
import { render } from 'preact';
import { ApiFailure } from './api';
import { App } from './app';
import { html } from './html';
import './styles.css';

const client = new QueryClient({
  defaultOptions: {
    queries: {
      staleTime: 10_000,
      // A 4xx will not change by asking again; a network blip might.
      retry: (count, err) => !(err instanceof ApiFailure && err.status < 500) && count < 2,
    },
  },
});

render(html`<${QueryClientProvider} client=${client}><${App} /></${QueryClientProvider}>`, document.getElementById('app')!);
