import { Injectable } from '@nestjs/common';
import type { BatchEndpoint } from '@atelier/contracts';
import type { BatchLineRunner } from './batch-line-runner';
import { ChatLineRunner } from './chat-line.runner';
import { EmbeddingsLineRunner } from './embeddings-line.runner';
import { ImageLineRunner } from './image-line.runner';
import { ResponsesLineRunner } from './responses-line.runner';

/** The runner of each batch endpoint. */
@Injectable()
export class BatchLineRunners {
  private readonly runners: Record<BatchEndpoint, BatchLineRunner>;

  constructor(chat: ChatLineRunner, responses: ResponsesLineRunner, embeddings: EmbeddingsLineRunner, images: ImageLineRunner) {
    this.runners = { '/v1/chat/completions': chat, '/v1/responses': responses, '/v1/embeddings': embeddings, '/v1/images/generations': images };
  }

  for(endpoint: string): BatchLineRunner {
    const runner = this.runners[endpoint as BatchEndpoint];
    if (!runner) throw new Error(`No batch runner for ${endpoint}`);
    return runner;
  }
}

export const BATCH_LINE_RUNNERS = [ChatLineRunner, ResponsesLineRunner, EmbeddingsLineRunner, ImageLineRunner, BatchLineRunners];
