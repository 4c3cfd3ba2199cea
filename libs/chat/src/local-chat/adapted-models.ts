import { ApiError } from '@atelier/contracts';
import { parseNgramCounts } from '@atelier/ngram';
import type { BlobStore } from '@atelier/storage';
import { AdaptedMarkovModel, localChatModel, type MarkovModel } from './markov-model';

/** Fine-tuned local-chat models kept loaded, most recently used last. */
const MAX_LOADED = 32;

/**
 * Loads a deployed fine-tune's counts (the checkpoint's adapter_model.json) from the blob store
 * once, and keeps the model built from them for the requests that follow.
 */
export class AdaptedModels {
  private readonly loaded = new Map<string, Promise<MarkovModel>>();

  constructor(private readonly blobs: BlobStore) {}

  get(key: string): Promise<MarkovModel> {
    let model = this.loaded.get(key);
    if (model) {
      this.loaded.delete(key);
      this.loaded.set(key, model);
      return model;
    }
    model = this.load(key);
    model.catch(() => this.loaded.delete(key));
    this.loaded.set(key, model);
    for (const old of this.loaded.keys()) {
      if (this.loaded.size <= MAX_LOADED) break;
      this.loaded.delete(old);
    }
    return model;
  }

  private async load(key: string): Promise<MarkovModel> {
    const blob = await this.blobs.get(key);
    if (!blob) throw new ApiError('service_unavailable', 'The fine-tuned model files are missing from storage');
    const chunks: Buffer[] = [];
    for await (const chunk of blob.body as AsyncIterable<Buffer>) chunks.push(chunk);
    return new AdaptedMarkovModel(parseNgramCounts(Buffer.concat(chunks).toString('utf8')), localChatModel());
  }
}
