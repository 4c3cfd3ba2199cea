import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { NgramCounts, parseNgramCounts } from '@atelier/ngram';
import { fetchMedia } from '@atelier/safe-fetch';
import sharp from 'sharp';
import { describeImage, STYLE_SAMPLE_SIZE, StyleLearner, type ImageStyleState } from './image-style-learning';
import { openParquet, readRowWindows } from './parquet-dataset';
import { datasetLimits } from './fine-tunes.service';
import { Trainers } from './trainers.service';

/** The lease as POST /api/trainer/lease returns it (the fields this trainer uses). */
interface Lease {
  lease_id: string;
  heartbeat_seconds: number;
  fine_tune: {
    id: string;
    base_model: string;
    script_type: string;
    training_params: Record<string, unknown>;
    tokenization: { tokens_x_epochs: number | null; total_tokens: number } | null;
  };
  dataset: { url: string; sha256: string; size_bytes: number } | null;
  resume_from: null | { step: number; files: { path: string; url: string; size_bytes: number }[] };
}

export const ADAPTER_FILE = 'adapter_model.json';
const LOCAL_IMAGE_BASE = 'atelier/local-image';

/** A downloaded file as the Parquet reader reads it. */
function arrayBufferOf(bytes: Buffer) {
  const view = new Uint8Array(bytes).buffer;
  return { byteLength: bytes.byteLength, slice: async (start: number, end?: number) => view.slice(start, end ?? bytes.byteLength) };
}
export const ADAPTER_CONFIG_FILE = 'adapter_config.json';
/** Chunks an epoch is learned in: the steps a run reports. */
const MAX_STEPS_PER_EPOCH = 10;

class TrainerHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The text a row teaches: a question and its answer, or the contents of a conversation. */
export function rowText(scriptType: string, params: Record<string, unknown>, row: Record<string, unknown>): string {
  const text = (v: unknown) => (typeof v === 'string' ? v : v instanceof Uint8Array ? Buffer.from(v).toString('utf8') : '');
  if (scriptType === 'text_chat_messages') {
    const raw = text(row[String(params.messages_column)]);
    try {
      const messages = JSON.parse(raw) as { content?: unknown }[];
      return Array.isArray(messages) ? messages.map((m) => (typeof m?.content === 'string' ? m.content : '')).join(' ') : '';
    } catch {
      return '';
    }
  }
  return `${text(row[String(params.question_column)])} ${text(row[String(params.answer_column)])}`.trim();
}

/**
 * The built-in trainer: a client of the trainer HTTP API like any team's own (TRL, axolotl...),
 * started with the fine-tune service (BUILTIN_TRAINER), serving atelier/local-chat. It learns the
 * word n-gram counts local-chat samples from, from the dataset's text, a chunk per step; reports
 * the held-out negative log-likelihood per word as the loss; writes the counts as checkpoint
 * files; and stops when told. A demonstration engine: what it exercises for real is every route,
 * state, charge and crash path of the protocol.
 */
@Injectable()
export class BuiltinTrainer implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(BuiltinTrainer.name);
  private readonly stopping = new AbortController();
  private loop?: Promise<void>;
  private token = '';
  private trainerId?: string;

  constructor(
    private readonly trainers: Trainers,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.config.BUILTIN_TRAINER) return;
    // Several runs at once, each with its own deadline: one run whose dataset never arrives holds
    // one slot for at most BUILTIN_TRAINER_RUN_TIMEOUT_MS, never every tenant's runs.
    this.loop = Promise.all(Array.from({ length: this.config.BUILTIN_TRAINER_CONCURRENCY }, () => this.run())).then(() => undefined);
  }

  async onModuleDestroy(): Promise<void> {
    this.stopping.abort();
    await this.loop;
    if (this.trainerId) await this.trainers.revokeBuiltin(this.trainerId).catch(() => undefined);
  }

  /** This process's trainer row and token, made once for all its slots. */
  private registering?: Promise<void>;
  private register(): Promise<void> {
    this.registering ??= this.trainers.createBuiltin().then(
      ({ id, token }) => {
        this.trainerId = id;
        this.token = token;
      },
      (err: unknown) => {
        this.registering = undefined;
        throw err;
      },
    );
    return this.registering;
  }

  private async run(): Promise<void> {
    let quietUntil = 0;
    while (!this.stopping.signal.aborted) {
      try {
        await this.register();
        const lease = await this.call<Lease | undefined>('POST', '/api/trainer/lease', { wait_seconds: 30 });
        if (lease) await this.train(lease);
      } catch (err) {
        if (this.stopping.signal.aborted) return;
        // The gateway not up yet (or restarting): say so once a minute, and try again shortly.
        if (Date.now() > quietUntil) {
          this.logger.warn(`Built-in trainer: ${(err as Error).message}; retrying`);
          quietUntil = Date.now() + 60_000;
        }
        await new Promise((r) => setTimeout(r, 2_000).unref());
      }
    }
  }

  private apiUrl(): string {
    return this.config.BUILTIN_TRAINER_API_URL ?? `http://127.0.0.1:${this.config.PORT}`;
  }

  private async call<T>(method: string, path: string, body?: unknown, raw?: Buffer, signal: AbortSignal = this.signal()): Promise<T> {
    const res = await fetch(new URL(path, this.apiUrl()), {
      method,
      headers: { authorization: `Bearer ${this.token}`, 'content-type': raw ? 'application/octet-stream' : 'application/json' },
      body: raw ? new Uint8Array(raw) : body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    if (res.status === 204) return undefined as T;
    const text = await res.text();
    if (!res.ok) throw new TrainerHttpError(res.status, `${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /**
   * A file the lease links to (the pinned dataset, a checkpoint): links the gateway signed and sent
   * in the authenticated lease, so their host is the service's own (PUBLIC_URL, S3) and allowed;
   * fetched through safe-fetch all the same, with the size the lease declares and
   * BUILTIN_TRAINER_FETCH_TIMEOUT_MS.
   */
  private async download(url: string, sizeBytes: number, label: string): Promise<Buffer> {
    let host: string;
    try {
      host = new URL(url).host.toLowerCase();
    } catch {
      throw new Error(`the lease's ${label} link is not a URL`);
    }
    const fetched = await fetchMedia(url, {
      maxBytes: Math.max(sizeBytes, 1),
      timeoutMs: this.config.BUILTIN_TRAINER_FETCH_TIMEOUT_MS,
      allowedHosts: [...this.config.MEDIA_FETCH_ALLOWED_HOSTS, host],
      signal: this.signal(),
      label,
    });
    return fetched.data;
  }

  /** An image a dataset row links to: a tenant's URL, under exactly the media rules (MEDIA_FETCH_*). */
  private async downloadRowImage(url: string, row: number, column: string): Promise<Buffer> {
    try {
      return (
        await fetchMedia(url, {
          maxBytes: this.config.MEDIA_FETCH_MAX_BYTES,
          timeoutMs: this.config.MEDIA_FETCH_TIMEOUT_MS,
          allowedHosts: this.config.MEDIA_FETCH_ALLOWED_HOSTS,
          accept: ['image/*'],
          signal: this.signal(),
          label: `row ${row} ${column}`,
        })
      ).data;
    } catch (err) {
      throw new Error(`row ${row}: the image link in column ${column} could not be fetched: ${(err as Error).message}`);
    }
  }

  /** Each run's own signal: the service stopping, or the run's deadline. */
  private readonly runSignal = new AsyncLocalStorage<AbortSignal>();

  /** What ends the current call: its run's signal inside a run, else the service stopping. */
  private signal(): AbortSignal {
    return this.runSignal.getStore() ?? this.stopping.signal;
  }

  private async train(lease: Lease): Promise<void> {
    const deadline = AbortSignal.timeout(this.config.BUILTIN_TRAINER_RUN_TIMEOUT_MS);
    const signal = AbortSignal.any([this.stopping.signal, deadline]);
    await this.runSignal.run(signal, () => this.trainWithin(lease, deadline));
  }

  private async trainWithin(lease: Lease, deadline: AbortSignal): Promise<void> {
    const base = `/api/trainer/leases/${lease.lease_id}`;
    let seq = 0;
    const send = async (...events: Record<string, unknown>[]) =>
      (await this.call<{ cancel: boolean }>('POST', `${base}/events`, { events: events.map((e) => ({ seq: ++seq, ...e })) })).cancel;
    try {
      const ft = lease.fine_tune;
      await send({ type: 'status', phase: 'downloading' });
      if (!lease.dataset) throw new Error('the lease names no dataset');
      const bytes = await this.download(lease.dataset.url, lease.dataset.size_bytes, 'dataset');
      if (createHash('sha256').update(bytes).digest('hex') !== lease.dataset.sha256) throw new Error('the dataset does not match its sha256');
      if (ft.base_model === LOCAL_IMAGE_BASE) return await this.trainStyle(lease, bytes, base, send);
      const texts = await this.datasetTexts(bytes, ft.script_type, ft.training_params);
      if (texts.length === 0) throw new Error('the dataset has no text to learn from');
      // Every tenth row is held out to measure the loss on (at least one).
      const heldOut = texts.filter((_, i) => i % 10 === 9);
      if (heldOut.length === 0) heldOut.push(texts[texts.length - 1]);
      const train = texts.filter((_, i) => i % 10 !== 9);
      const heldOutText = heldOut.join('\n');
      const epochs = Math.max(1, Number(ft.training_params.epochs ?? 1) || 1);
      const perEpoch = Math.max(1, Math.min(MAX_STEPS_PER_EPOCH, train.length));
      const total = perEpoch * epochs;
      const saveEvery = this.saveEvery(ft.training_params, perEpoch, total);
      const tokens = ft.tokenization?.tokens_x_epochs ?? ft.tokenization?.total_tokens ?? 0;

      let counts = new NgramCounts();
      let step = 0;
      if (lease.resume_from) {
        const file = lease.resume_from.files.find((f) => f.path === ADAPTER_FILE);
        if (file) {
          counts = NgramCounts.fromJSON(parseNgramCounts((await this.download(file.url, file.size_bytes, file.path)).toString('utf8')));
          step = lease.resume_from.step;
          await send({ type: 'log', line: `resuming from checkpoint ${step}` });
        }
      }
      await send({ type: 'status', phase: 'training' }, { type: 'log', line: `training ${ft.base_model} on ${train.length} rows (${heldOut.length} held out), ${total} steps` });
      while (step < total) {
        const chunk = step % perEpoch;
        const from = Math.floor((chunk * train.length) / perEpoch);
        const to = Math.floor(((chunk + 1) * train.length) / perEpoch);
        for (const text of train.slice(from, to)) counts.learn(text);
        step++;
        const loss = Number(counts.nll(heldOutText).toFixed(6));
        const metrics = { step, loss, learning_rate: Number(ft.training_params.learning_rate ?? 0), epoch: Number((step / perEpoch).toFixed(4)) };
        let cancel = await send({ type: 'metrics', ...metrics });
        if (step % saveEvery === 0 || step === total) cancel = (await this.checkpoint(base, send, step, counts, metrics)) || cancel;
        if (cancel) {
          await send({ type: 'log', line: `stopped at step ${step} of ${total}` });
          await this.call('POST', `${base}/complete`, { trained_tokens: Math.round((tokens * step) / total), final_step: step });
          return;
        }
        await new Promise((r) => setTimeout(r, this.config.BUILTIN_TRAINER_STEP_MS).unref());
      }
      await this.call('POST', `${base}/complete`, { trained_tokens: tokens, final_step: step });
    } catch (err) {
      if (this.stopping.signal.aborted) return;
      // A lease lost meanwhile (409) is the service's to hand on; anything else fails the run.
      if (err instanceof TrainerHttpError && err.status === 409) return;
      const message = deadline.aborted ? `the run did not finish within BUILTIN_TRAINER_RUN_TIMEOUT_MS (${this.config.BUILTIN_TRAINER_RUN_TIMEOUT_MS} ms)` : (err as Error).message;
      this.logger.warn(`Built-in trainer: fine-tune ${lease.fine_tune.id} failed: ${message}`);
      await this.call('POST', `${base}/fail`, { error: message }, undefined, this.stopping.signal).catch(() => undefined);
    }
  }

  /**
   * atelier/local-image: learns the palette, saturation, lightness and horizon of the dataset's
   * images (bytes in the image column, or http(s) links), a chunk of images per report. Its
   * `steps` are the run's steps (charged per step); the loss is the share of the held-out images'
   * colour the learned palette does not cover.
   */
  private async trainStyle(lease: Lease, bytes: Buffer, base: string, send: (...e: Record<string, unknown>[]) => Promise<boolean>): Promise<void> {
    const ft = lease.fine_tune;
    const column = String(ft.training_params.image_column);
    const images: ReturnType<typeof describeImage>[] = [];
    let rowNumber = 0;
    for await (const window of readRowWindows(await openParquet(arrayBufferOf(bytes), datasetLimits(this.config)), [column])) {
      for (const row of window.rows) {
        rowNumber++;
        const cell = row[column];
        const data = cell instanceof Uint8Array ? Buffer.from(cell) : typeof cell === 'string' && /^https?:\/\//.test(cell) ? await this.downloadRowImage(cell, rowNumber, column) : undefined;
        if (!data) continue;
        const raw = await sharp(data).resize(STYLE_SAMPLE_SIZE, STYLE_SAMPLE_SIZE, { fit: 'fill' }).removeAlpha().raw().toBuffer().catch(() => undefined);
        if (raw) images.push(describeImage(raw, STYLE_SAMPLE_SIZE, STYLE_SAMPLE_SIZE));
      }
    }
    if (images.length === 0) throw new Error(`no image of the dataset's ${column} column could be read (bytes or http(s) links)`);
    const heldOut = images.filter((_, i) => i % 10 === 9);
    if (heldOut.length === 0) heldOut.push(images[images.length - 1]);
    const train = images.filter((_, i) => i % 10 !== 9);
    const steps = Math.max(1, Number(ft.training_params.steps ?? 1) || 1);
    const chunks = Math.max(1, Math.min(MAX_STEPS_PER_EPOCH, train.length, steps));
    let learner = new StyleLearner();
    let chunk = 0;
    if (lease.resume_from) {
      const file = lease.resume_from.files.find((f) => f.path === ADAPTER_FILE);
      if (file) {
        learner = StyleLearner.from(JSON.parse((await this.download(file.url, file.size_bytes, file.path)).toString('utf8')) as ImageStyleState);
        chunk = Math.round((lease.resume_from.step / steps) * chunks);
      }
    }
    await send({ type: 'status', phase: 'training' }, { type: 'log', line: `learning the style of ${train.length} images (${heldOut.length} held out) over ${steps} steps` });
    while (chunk < chunks) {
      const from = Math.floor((chunk * train.length) / chunks);
      const to = Math.floor(((chunk + 1) * train.length) / chunks);
      for (const image of train.slice(from, to)) learner.learn(image);
      chunk++;
      const step = Math.round((chunk * steps) / chunks);
      const metrics = { step, loss: Number(learner.loss(heldOut).toFixed(6)), learning_rate: Number(ft.training_params.learning_rate ?? 0), epoch: Number((chunk / chunks).toFixed(4)) };
      let cancel = await send({ type: 'metrics', ...metrics });
      cancel = (await this.checkpointFiles(base, send, step, JSON.stringify(learner.state()), { base_model: LOCAL_IMAGE_BASE, format: 'atelier-image-style-v1', step }, metrics)) || cancel;
      if (cancel) {
        await this.call('POST', `${base}/complete`, { trained_steps: step, final_step: step });
        return;
      }
      await new Promise((r) => setTimeout(r, this.config.BUILTIN_TRAINER_STEP_MS).unref());
    }
    await this.call('POST', `${base}/complete`, { trained_steps: steps, final_step: steps });
  }

  /** save_strategy: every save_steps_ratio of the run ('steps'), at each epoch's end ('epoch'), or only at the end ('no'). */
  private saveEvery(params: Record<string, unknown>, perEpoch: number, total: number): number {
    if (params.save_strategy === 'no') return total;
    if (params.save_strategy === 'steps') return Math.max(1, Math.round(total * Number(params.save_steps_ratio ?? 0.25)));
    return perEpoch;
  }

  private checkpoint(base: string, send: (...e: Record<string, unknown>[]) => Promise<boolean>, step: number, counts: NgramCounts, metrics: Record<string, number>): Promise<boolean> {
    return this.checkpointFiles(base, send, step, JSON.stringify(counts), { base_model: 'atelier/local-chat', format: 'atelier-word-ngrams-v1', step, words: counts.words }, metrics);
  }

  /** Uploads a checkpoint's two files, then seals it with its event. */
  private async checkpointFiles(
    base: string,
    send: (...e: Record<string, unknown>[]) => Promise<boolean>,
    step: number,
    adapter: string,
    config: Record<string, unknown>,
    metrics: Record<string, number>,
  ): Promise<boolean> {
    await send({ type: 'status', phase: 'uploading' });
    await this.call('PUT', `${base}/checkpoints/${step}/files/${ADAPTER_FILE}`, undefined, Buffer.from(adapter));
    await this.call('PUT', `${base}/checkpoints/${step}/files/${ADAPTER_CONFIG_FILE}`, undefined, Buffer.from(JSON.stringify(config)));
    return send({ type: 'checkpoint', step, metrics }, { type: 'status', phase: 'training' });
  }

  private async datasetTexts(bytes: Buffer, scriptType: string, params: Record<string, unknown>): Promise<string[]> {
    const dataset = await openParquet(arrayBufferOf(bytes), datasetLimits(this.config));
    const columns = scriptType === 'text_chat_messages' ? [String(params.messages_column)] : [String(params.question_column), String(params.answer_column)];
    const texts: string[] = [];
    for await (const window of readRowWindows(dataset, columns)) for (const row of window.rows) {
      const text = rowText(scriptType, params, row);
      if (text) texts.push(text);
    }
    return texts;
  }
}
