import type { ModelDefinition } from '@atelier/models';

export interface RenderTarget {
  generationId: string;
  /** The billed namespace (outputs are stored under it). */
  namespace: string;
  namespaceId: string;
  userId: string;
  repo: string | null;
  directory: string | null;
}

export interface RenderResult {
  /** Blob keys of the stored outputs, in order. */
  keys: string[];
  /** What the outputs cost (images produced, or seconds of video really rendered). */
  cost: string;
}

/**
 * Runs a model on validated parameters and stores what it produced. The queue worker depends
 * on this abstraction so the generation lifecycle stays free of engine code; the app binds it
 * to the media engines. Must stop promptly when `signal` aborts (cancel, shutdown).
 */
export abstract class GenerationRenderer {
  abstract render(model: ModelDefinition, params: Record<string, unknown>, target: RenderTarget, signal: AbortSignal): Promise<RenderResult>;
}
