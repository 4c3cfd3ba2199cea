import { IMAGE_RENDER_QUEUE, VIDEO_RENDER_QUEUE, type MediaRenderJob, type MediaRenderResult } from '@atelier/contracts';
import { MediaRenderer } from './media-renderer.service';
import { HandlesQueue, type JobContext, type JobHandler } from '@atelier/runtime';

/** Synchronous image renders (generate and edit); the gateway waits on the reply channel. */
@HandlesQueue(IMAGE_RENDER_QUEUE)
export class ImageRenderProcessor implements JobHandler<typeof IMAGE_RENDER_QUEUE> {
  constructor(private readonly renderer: MediaRenderer) {}

  handle(job: MediaRenderJob, ctx: JobContext): Promise<MediaRenderResult> {
    return this.renderer.render(job, ctx.signal);
  }
}

/** Synchronous video renders, on their own queue and worker so they never hold up images. */
@HandlesQueue(VIDEO_RENDER_QUEUE)
export class VideoRenderProcessor implements JobHandler<typeof VIDEO_RENDER_QUEUE> {
  constructor(private readonly renderer: MediaRenderer) {}

  handle(job: MediaRenderJob, ctx: JobContext): Promise<MediaRenderResult> {
    return this.renderer.render(job, ctx.signal);
  }
}
