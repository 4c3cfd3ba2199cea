/** gen_ai.provider.name: the upstream's kind, as the semantic conventions name providers (openai, ...) where atelier can tell. */
export function genAiProvider(model: { engine: { type: string; name?: string; base_url?: string } }): string {
  const engine = model.engine;
  if (engine.type === 'builtin') return `atelier.${engine.name}`;
  if (engine.base_url?.includes('api.openai.com')) return 'openai';
  return engine.type;
}
