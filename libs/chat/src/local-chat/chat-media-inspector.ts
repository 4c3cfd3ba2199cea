import sharp from 'sharp';
import type { AppConfig } from '@atelier/config';
import { fetchMedia } from '@atelier/safe-fetch';
import type { ChatRequest } from '../chat-types';
import type { MediaDescription } from './local-chat-generator';
import type { MediaInspector } from './local-chat.provider';

/**
 * Downloads the image and video parts of the conversation's messages through the SSRF-guarded
 * fetcher the media engines use (public addresses only, size and time bounded), so local-chat
 * can say what it received. An unreachable or forbidden URL is the caller's 400, naming the part.
 */
export class ChatMediaInspector implements MediaInspector {
  constructor(private readonly config: Pick<AppConfig, 'MEDIA_FETCH_ALLOWED_HOSTS' | 'MEDIA_FETCH_MAX_BYTES' | 'MEDIA_FETCH_TIMEOUT_MS'>) {}

  async describe(request: ChatRequest, signal: AbortSignal): Promise<MediaDescription[]> {
    const parts: { url: string; kind: 'image' | 'video'; label: string }[] = [];
    request.messages.forEach((m, i) => {
      if (m.role !== 'user' || !Array.isArray(m.content)) return;
      m.content.forEach((p, j) => {
        if (p.type === 'image_url' && p.image_url) parts.push({ url: p.image_url.url, kind: 'image', label: `messages[${i}].content[${j}].image_url.url` });
        if (p.type === 'video_url' && p.video_url) parts.push({ url: p.video_url.url, kind: 'video', label: `messages[${i}].content[${j}].video_url.url` });
      });
    });
    return Promise.all(
      parts.map(async (part) => {
        const media = await fetchMedia(part.url, {
          accept: [part.kind === 'image' ? 'image/*' : 'video/*'],
          label: part.label,
          signal,
          allowedHosts: this.config.MEDIA_FETCH_ALLOWED_HOSTS,
          maxBytes: this.config.MEDIA_FETCH_MAX_BYTES,
          timeoutMs: this.config.MEDIA_FETCH_TIMEOUT_MS,
        });
        const description: MediaDescription = { kind: part.kind, contentType: media.contentType, bytes: media.data.length };
        if (part.kind === 'image') {
          const meta = await sharp(media.data).metadata().catch(() => undefined);
          if (meta?.width && meta.height) Object.assign(description, { width: meta.width, height: meta.height });
        }
        return description;
      }),
    );
  }
}
