import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sharp } from './libvips';
import { ApiError } from '@atelier/contracts';
import type { EngineEnvironment, EngineRequest, EngineResult, MediaEngine } from '../engine';
import { sampledSteps, throwIfAborted } from '../engine-errors';
import { FfmpegError, probeMedia, runFfmpeg, untrustedInput, videoDemuxer, type VideoDemuxer } from './ffmpeg';
import { MAX_INPUT_PIXELS } from './input-limits';
import { parseAspectRatio, videoSize, type Size } from './geometry';
import { fnv1a32, range, seededRandom } from '@atelier/random';
import { sceneSvg, spriteSvg } from './scene';
import { seedOf } from './local-image.engine';

export const DEFAULT_VIDEO_SECONDS = 5;
export const MAX_AUTO_SECONDS = 20;

interface Shot {
  prompt: string;
  frames: number;
}

/** Shot list with exact frame counts: num_frames overrides durations (spread over shots by their share). */
export function planShots(params: Readonly<Record<string, unknown>>, fps: number, autoSeconds: number): Shot[] {
  const seconds = (d: unknown) => (typeof d === 'number' ? d : d === 'auto' ? autoSeconds : DEFAULT_VIDEO_SECONDS);
  const shots = Array.isArray(params.multi_prompt)
    ? (params.multi_prompt as { prompt: string; duration: unknown }[]).map((s) => ({ prompt: String(s.prompt), frames: Math.max(1, Math.round(seconds(s.duration) * fps)) }))
    : [{ prompt: String(params.prompt ?? ''), frames: Math.max(1, Math.round(seconds(params.duration) * fps)) }];
  if (typeof params.num_frames === 'number') {
    const total = shots.reduce((n, s) => n + s.frames, 0);
    let left = params.num_frames;
    shots.forEach((s, i) => {
      const share = i === shots.length - 1 ? left : Math.max(1, Math.round((s.frames * (params.num_frames as number)) / total));
      s.frames = Math.max(1, Math.min(share, left - (shots.length - 1 - i)));
      left -= s.frames;
    });
  }
  return shots;
}

const num = (n: number) => (Math.round(n * 1e4) / 1e4).toString();

/** A soft chord per shot, its notes derived from the shot's prompt. */
function audioExpression(shots: Shot[], fps: number): string {
  let start = 0;
  const parts = shots.map((shot) => {
    const h = fnv1a32(shot.prompt);
    const root = 110 * Math.pow(2, (h % 24) / 12);
    const third = root * Math.pow(2, (h & 32 ? 3 : 4) / 12);
    const fifth = root * Math.pow(2, 7 / 12);
    const end = start + shot.frames / fps;
    const tone = `(0.10*sin(2*PI*${num(root)}*t)+0.07*sin(2*PI*${num(third)}*t)+0.05*sin(2*PI*${num(fifth)}*t))*(0.75+0.25*sin(2*PI*0.5*t))`;
    const part = `between(t,${num(start)},${num(end)})*${tone}`;
    start = end;
    return part;
  });
  return parts.join('+');
}

async function imageFile(dir: string, name: string, data: Buffer, size: Size, label: string): Promise<{ file: string; width: number; height: number }> {
  try {
    const meta = await sharp(data, { limitInputPixels: MAX_INPUT_PIXELS }).metadata();
    const file = path.join(dir, name);
    await sharp(data, { limitInputPixels: MAX_INPUT_PIXELS }).autoOrient().resize(size.width, size.height, { fit: 'cover' }).png({ compressionLevel: 1 }).toFile(file);
    return { file, width: meta.autoOrient?.width ?? meta.width ?? size.width, height: meta.autoOrient?.height ?? meta.height ?? size.height };
  } catch (err) {
    throw ApiError.badRequest(`${label} could not be decoded as an image: ${(err as Error).message}`);
  }
}

/**
 * Built-in video: a real H.264 MP4 encoded by ffmpeg. Each shot is a procedural scene (the
 * local-image renderer, larger than the frame) panned across, hue-drifting, with an orb moving
 * through it; shots are concatenated. A start image fades into the first shot, the last shot
 * fades into the tail image (so they are exactly the first and last frames), an input video
 * replaces the still background, and generate_audio adds an AAC soundtrack.
 */
export class LocalVideoEngine implements MediaEngine {
  constructor(private readonly env: EngineEnvironment) {}

  async run({ params, signal, onProgress }: EngineRequest): Promise<EngineResult> {
    // The emulated latency is the first 10 %; encoded frames the rest.
    await sampledSteps(this.env.localLatencyMs, 10, signal, (done, n) => onProgress?.((0.1 * done) / n));
    const seed = seedOf(params);
    const fps = typeof params.fps === 'number' ? params.fps : 24;
    const dir = await mkdtemp(path.join(tmpdir(), 'atelier-video-'));
    try {
      const firstUrl =
        typeof params.start_image_url === 'string'
          ? { url: params.start_image_url, label: 'start_image_url' }
          : typeof params.input_image === 'string'
            ? { url: params.input_image, label: 'input_image' }
            : Array.isArray(params.input_image)
              ? { url: String(params.input_image[0]), label: 'input_image[0]' }
              : undefined;
      const tailUrl = typeof params.tail_image_url === 'string' ? { url: params.tail_image_url, label: 'tail_image_url' } : undefined;
      const [firstMedia, tailMedia, videoMedia] = await Promise.all([
        firstUrl && this.env.fetchInput(firstUrl.url, { accept: ['image/*'], label: firstUrl.label, signal }),
        tailUrl && this.env.fetchInput(tailUrl.url, { accept: ['image/*'], label: tailUrl.label, signal }),
        typeof params.input_video === 'string' ? this.env.fetchInput(params.input_video, { accept: ['video/*'], label: 'input_video', signal }) : undefined,
      ]);

      let video: { file: string; demuxer: VideoDemuxer; durationSeconds?: number; width?: number; height?: number } | undefined;
      if (videoMedia) {
        const demuxer = videoDemuxer(videoMedia.data);
        if (!demuxer) throw ApiError.badRequest('input_video must be an MP4, MOV or WebM video');
        const file = path.join(dir, 'input-video');
        await writeFile(file, videoMedia.data);
        const probe = await probeMedia(this.env.ffmpegPath, file, demuxer, signal);
        if (!probe.width || !probe.height) throw ApiError.badRequest('input_video could not be decoded as a video');
        video = { file, demuxer, ...probe };
      }
      const firstMeta = firstMedia ? await sharp(firstMedia.data, { limitInputPixels: MAX_INPUT_PIXELS }).metadata().catch(() => undefined) : undefined;
      // aspect_ratio 'auto' (or none) follows the first reference image, else the input video, else 16:9.
      const aspect =
        typeof params.aspect_ratio === 'string' && params.aspect_ratio !== 'auto'
          ? parseAspectRatio(params.aspect_ratio)
          : firstMeta?.width && firstMeta.height
            ? { w: firstMeta.width, h: firstMeta.height }
            : video?.width && video.height
              ? { w: video.width, h: video.height }
              : { w: 16, h: 9 };
      const size = videoSize(params, aspect);
      const autoSeconds = video?.durationSeconds ? Math.min(MAX_AUTO_SECONDS, Math.max(1, Math.round(video.durationSeconds))) : DEFAULT_VIDEO_SECONDS;
      const shots = planShots(params, fps, autoSeconds);
      const totalFrames = shots.reduce((n, s) => n + s.frames, 0);
      throwIfAborted(signal);

      const first = firstMedia && firstUrl ? await imageFile(dir, 'first.png', firstMedia.data, size, firstUrl.label) : undefined;
      const tail = tailMedia && tailUrl ? await imageFile(dir, 'tail.png', tailMedia.data, size, tailUrl.label) : undefined;
      const args = await this.buildArgs(dir, shots, size, fps, seed, params, { first: first?.file, tail: tail?.file, video: video && { file: video.file, demuxer: video.demuxer } });
      const out = path.join(dir, 'out.mp4');
      try {
        await runFfmpeg(this.env.ffmpegPath, [...args, out], signal, (frame) => onProgress?.(0.1 + (0.9 * Math.min(frame, totalFrames)) / totalFrames));
      } catch (err) {
        if (err instanceof FfmpegError && video) throw ApiError.badRequest(`input_video could not be used: ${err.message}`);
        throw err;
      }
      throwIfAborted(signal);
      const data = await readFile(out);
      return {
        outputs: [{ data, contentType: 'video/mp4', extension: 'mp4', width: size.width, height: size.height, durationSeconds: totalFrames / fps }],
        seed,
      };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  private async buildArgs(
    dir: string,
    shots: Shot[],
    size: Size,
    fps: number,
    seed: number,
    params: Readonly<Record<string, unknown>>,
    refs: { first?: string; tail?: string; video?: { file: string; demuxer: VideoDemuxer } },
  ): Promise<string[]> {
    const { width: W, height: H } = size;
    // The background is larger than the frame so the camera can pan across it.
    const BW = Math.ceil((W * 1.25) / 2) * 2;
    const BH = Math.ceil((H * 1.25) / 2) * 2;
    const inputs: string[] = [];
    const filters: string[] = [];
    let index = 0;
    const addInput = (...a: string[]) => {
      inputs.push(...a);
      return index++;
    };
    const negativePrompt = typeof params.negative_prompt === 'string' ? params.negative_prompt : undefined;

    const labels: string[] = [];
    for (const [i, shot] of shots.entries()) {
      const seconds = shot.frames / fps;
      const random = seededRandom((seed + i * 7919) >>> 0);
      let bg: number;
      let bgChain: string;
      if (refs.video) {
        bg = addInput('-stream_loop', '-1', '-t', num(seconds + 1), ...untrustedInput(refs.video.file, refs.video.demuxer));
        bgChain = `[${bg}:v]scale=${BW}:${BH}:force_original_aspect_ratio=increase,crop=${BW}:${BH},fps=${fps},setsar=1`;
      } else {
        const file = path.join(dir, `bg-${i}.png`);
        await sharp(Buffer.from(sceneSvg({ prompt: shot.prompt, negativePrompt, seed: (seed + i) >>> 0, width: BW, height: BH, steps: 28 })))
          .png({ compressionLevel: 1 })
          .toFile(file);
        bg = addInput('-loop', '1', '-framerate', String(fps), '-t', num(seconds + 1), '-i', file);
        bgChain = `[${bg}:v]setsar=1`;
      }
      const spriteSize = Math.round(Math.min(W, H) * range(random, 0.12, 0.22));
      const spriteFile = path.join(dir, `sprite-${i}.png`);
      await sharp(Buffer.from(spriteSvg(shot.prompt, spriteSize))).png().toFile(spriteFile);
      const sprite = addInput('-loop', '1', '-framerate', String(fps), '-t', num(seconds + 1), '-i', spriteFile);

      const period = num(Math.max(4, seconds * range(random, 1.5, 3)));
      const phase = num(random() * Math.PI * 2);
      const hueRate = num(range(random, -12, 12));
      const direction = random() < 0.5 ? `mod(t/${num(Math.max(2, seconds))}+${num(random())},1)` : `1-mod(t/${num(Math.max(2, seconds))}+${num(random())},1)`;
      let chain =
        `${bgChain},crop=${W}:${H}:x='(iw-ow)*(0.5+0.5*sin(2*PI*t/${period}+${phase}))':y='(ih-oh)*(0.5+0.5*cos(2*PI*t/${period}*0.7+${phase}))',` +
        `hue=h='${hueRate}*t'[bg${i}];` +
        `[bg${i}][${sprite}:v]overlay=x='(W-w)*(${direction})':y='H*0.2+H*0.1*sin(2*PI*t/${period})':eval=frame:eof_action=pass`;
      if (i === 0 && refs.first) {
        const f = addInput('-loop', '1', '-framerate', String(fps), '-t', num(seconds + 1), '-i', refs.first);
        const fade = num(Math.min(1, seconds / 3));
        chain += `[pre${i}];[${f}:v]format=rgba,fade=t=out:st=0:d=${fade}:alpha=1[first];[pre${i}][first]overlay=eof_action=pass`;
      }
      if (i === shots.length - 1 && refs.tail) {
        const t = addInput('-loop', '1', '-framerate', String(fps), '-t', num(seconds + 1), '-i', refs.tail);
        const fade = Math.min(1, seconds / 3);
        const lastFrame = (shot.frames - 1) / fps;
        chain += `[post${i}];[${t}:v]format=rgba,fade=t=in:st=${num(Math.max(0, lastFrame - fade))}:d=${num(fade)}:alpha=1[tail];[post${i}][tail]overlay=eof_action=pass`;
      }
      chain += `,trim=end_frame=${shot.frames},setpts=PTS-STARTPTS,format=yuv420p[s${i}]`;
      filters.push(chain);
      labels.push(`[s${i}]`);
    }
    filters.push(shots.length > 1 ? `${labels.join('')}concat=n=${shots.length}:v=1:a=0[v]` : `${labels[0]}null[v]`);

    const totalFrames = shots.reduce((n, s) => n + s.frames, 0);
    const totalSeconds = totalFrames / fps;
    const audio: string[] = [];
    if (params.generate_audio === true) {
      const a = addInput('-f', 'lavfi', '-i', `aevalsrc=exprs='${audioExpression(shots, fps)}':s=44100:d=${num(totalSeconds)}`);
      filters.push(`[${a}:a]afade=t=in:d=${num(Math.min(0.5, totalSeconds / 4))},afade=t=out:st=${num(Math.max(0, totalSeconds - 0.5))}:d=${num(Math.min(0.5, totalSeconds / 4))}[a]`);
      audio.push('-map', '[a]', '-c:a', 'aac', '-b:a', '96k', '-flags:a', '+bitexact');
    }
    return [
      '-y',
      '-loglevel',
      'error',
      ...inputs,
      '-filter_complex',
      filters.join(';'),
      '-map',
      '[v]',
      ...audio,
      '-c:v',
      'libx264',
      '-preset',
      'veryfast',
      '-crf',
      '23',
      '-pix_fmt',
      'yuv420p',
      '-r',
      String(fps),
      '-frames:v',
      String(totalFrames),
      '-movflags',
      '+faststart',
      // Same inputs, same bytes: no encoder/version tags or timestamps in the file.
      '-fflags',
      '+bitexact',
      '-flags:v',
      '+bitexact',
      '-map_metadata',
      '-1',
    ];
  }
}
