import { ApiError } from '@atelier/contracts';
import type { MediaModelDefinition } from '@atelier/models';
import type { EngineEnvironment, MediaEngine } from './engine';
import { LocalImageEditEngine } from './local/local-image-edit.engine';
import { LocalImageEngine } from './local/local-image.engine';
import { LocalVideoEngine } from './local/local-video.engine';
import { OpenAiImagesEngine } from './remote/openai-images.engine';
import { PredictionEngine } from './remote/prediction.engine';

export const BUILTIN_MEDIA_ENGINES = ['local-image', 'local-image-edit', 'local-video'] as const;

/** Picks the engine a catalog model names; one engine instance per model. */
export class EngineRegistry {
  private readonly engines = new WeakMap<MediaModelDefinition, MediaEngine>();

  constructor(readonly env: EngineEnvironment) {}

  engineFor(model: MediaModelDefinition): MediaEngine {
    let engine = this.engines.get(model);
    if (!engine) {
      engine = this.create(model);
      this.engines.set(model, engine);
    }
    return engine;
  }

  private create(model: MediaModelDefinition): MediaEngine {
    const config = model.engine;
    switch (config.type) {
      case 'builtin':
        if (config.name === 'local-image') return new LocalImageEngine(this.env);
        if (config.name === 'local-image-edit') return new LocalImageEditEngine(this.env);
        if (config.name === 'local-video') return new LocalVideoEngine(this.env);
        break;
      case 'openai-images':
        if (model.endpoint !== '/videos/generate') return new OpenAiImagesEngine(config, this.env);
        break;
      case 'prediction':
        return new PredictionEngine(config, this.env);
    }
    throw new ApiError('service_unavailable', `Model ${model.id} has no usable media engine (${config.type}${config.type === 'builtin' ? ` ${config.name}` : ''})`);
  }
}
