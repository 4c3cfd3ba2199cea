import { Readable } from 'node:stream';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { uuidV7 } from '@atelier/random';
import { BlobStore } from '@atelier/storage';
import { BatchEvents } from './batch-events.service';
import { batchId } from './batch-object';
import { BatchesRepository } from './batches.repository';
import { FilesRepository } from './files.repository';

/** Lines read per query while a file is written. */
const PAGE = 1000;
/** States a batch may be finalized from (finalizing: a step that died half way). */
const FINALIZABLE = ['in_progress', 'cancelling', 'finalizing'] as const;

/**
 * The batch's last step, once no line is left to run: its output file (the lines that answered
 * 200) and error file (every other line), as OpenAI writes them, one JSONL line
 * `{id, custom_id, response: {status_code, request_id, body}, error}` per request in input
 * order, streamed from the lines into the blob store; then the batch ends `completed`,
 * `expired` (its window passed) or `cancelled`. The files and the end are written in one
 * transaction guarded by the batch's state, so of two finalizers one wins and the other removes
 * what it wrote.
 */
@Injectable()
export class BatchFinalize {
  private readonly logger = new Logger(BatchFinalize.name);

  constructor(
    private readonly batches: BatchesRepository,
    private readonly files: FilesRepository,
    private readonly blobs: BlobStore,
    private readonly events: BatchEvents,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'FILES_TTL_DAYS'>,
  ) {}

  async finalize(id: string): Promise<void> {
    const batch = await this.batches.byId(id);
    if (!batch || !(FINALIZABLE as readonly string[]).includes(batch.status)) return;
    if ((await this.batches.tally(id)).open > 0) return;
    const cancelling = batch.status === 'cancelling';
    if (batch.status === 'in_progress') await this.events.transition(id, ['in_progress'], 'finalizing', { finalizingAt: new Date() });
    const namespace = await this.batches.namespaceName(batch.namespaceId);
    const expiresAt = new Date(Date.now() + (batch.outputExpiresAfter ? batch.outputExpiresAfter * 1000 : this.config.FILES_TTL_DAYS * 86_400_000));
    const written: { id: string; key: string; bytes: number; sha256: string; kind: 'output' | 'error' }[] = [];
    try {
      for (const kind of ['output', 'error'] as const) {
        const lines = await this.count(id, kind);
        if (lines === 0) continue;
        const fileUuid = uuidV7();
        const blob = await this.blobs.put(`${namespace}/files/${fileUuid}`, Readable.from(this.jsonl(id, kind)), 'application/jsonl');
        written.push({ id: fileUuid, key: blob.key, bytes: blob.size, sha256: blob.sha256, kind });
      }
      const now = new Date();
      const end = cancelling ? 'cancelled' : batch.expiresAt <= now || (await this.anyExpired(id)) ? 'expired' : 'completed';
      const stamp = end === 'cancelled' ? { cancelledAt: now } : end === 'expired' ? { expiredAt: now } : { completedAt: now };
      const output = written.find((w) => w.kind === 'output');
      const errors = written.find((w) => w.kind === 'error');
      const ended = await this.batches.inTransaction(async (tx) => {
        for (const w of written)
          await this.files.create(
            { id: w.id, namespaceId: batch.namespaceId, userId: batch.userId, filename: `${batchId(id)}_${w.kind}.jsonl`, purpose: 'batch_output', bytes: w.bytes, sha256: w.sha256, blobKey: w.key, expiresAt },
            tx,
          );
        const moved = await this.events.transition(id, ['finalizing', 'cancelling'], end, { ...stamp, outputFileId: output?.id ?? null, errorFileId: errors?.id ?? null }, tx);
        if (!moved) throw new AlreadyEnded();
        return true;
      });
      if (ended) {
        this.logger.log(`Batch ${batchId(id)} ${end}`);
        await this.events.announce(id);
      }
    } catch (err) {
      await Promise.all(written.map((w) => this.blobs.delete(w.key).catch(() => undefined)));
      if (err instanceof AlreadyEnded) return;
      throw err;
    }
  }

  private async count(id: string, kind: 'output' | 'error'): Promise<number> {
    const tally = await this.batches.tally(id);
    return kind === 'output' ? tally.completed : tally.failed;
  }

  private async anyExpired(id: string): Promise<boolean> {
    return this.batches.hasLineIn(id, 'expired');
  }

  /** The file's lines, read a page at a time: a 50,000-line batch's answers are never held whole. */
  private async *jsonl(id: string, kind: 'output' | 'error'): AsyncGenerator<string> {
    let after = 0;
    for (;;) {
      const page = await this.batches.endedLines(id, after, PAGE);
      if (page.length === 0) return;
      after = page[page.length - 1].lineNo;
      let text = '';
      for (const line of page) {
        if ((line.status === 'succeeded') !== (kind === 'output')) continue;
        text += JSON.stringify({ id: `batch_req_${line.id.replace(/-/g, '')}`, custom_id: line.customId, response: line.response ?? null, error: line.error ?? null }) + '\n';
      }
      if (text) yield text;
    }
  }
}

class AlreadyEnded extends Error {}
