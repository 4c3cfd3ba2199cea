import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { GenerationCancelledError } from '../engine-errors';

/** The ffmpeg shipped by @ffmpeg-installer/ffmpeg (a static build with libx264 and aac). */
export function bundledFfmpegPath(): string {
  // Resolved lazily: services that never render video do not need the package's platform binary.
  const req = createRequire(__filename);
  return (req('@ffmpeg-installer/ffmpeg') as { path: string }).path;
}

export class FfmpegError extends Error {
  constructor(
    message: string,
    readonly stderr: string,
  ) {
    super(message);
    this.name = 'FfmpegError';
  }
}

/**
 * Runs ffmpeg to completion. Aborting the signal kills the process at once (SIGKILL: a
 * cancelled render must stop using CPU now, not after flushing the file it no longer needs).
 */
export function runFfmpeg(ffmpegPath: string, args: readonly string[], signal: AbortSignal, onFrame?: (frame: number) => void): Promise<string> {
  if (signal.aborted) return Promise.reject(new GenerationCancelledError());
  return new Promise((resolve, reject) => {
    // -progress writes `frame=<n>` lines (among others) to stdout as encoding goes.
    const progress = onFrame ? ['-progress', 'pipe:1', '-nostats'] : [];
    const child = spawn(ffmpegPath, ['-hide_banner', '-nostdin', ...progress, ...args], { stdio: ['ignore', onFrame ? 'pipe' : 'ignore', 'pipe'] });
    if (onFrame && child.stdout) {
      let partial = '';
      child.stdout.setEncoding('utf8');
      child.stdout.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          const m = /^frame=(\d+)/.exec(line);
          if (m) onFrame(Number(m[1]));
        }
      });
    }
    let stderr = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      // Only the tail matters for error messages; keep memory bounded on long encodes.
      stderr = (stderr + chunk).slice(-16_384);
    });
    const onAbort = () => child.kill('SIGKILL');
    signal.addEventListener('abort', onAbort, { once: true });
    child.once('error', (err) => {
      signal.removeEventListener('abort', onAbort);
      reject(new FfmpegError(`could not start ffmpeg (${ffmpegPath}): ${err.message}`, stderr));
    });
    child.once('close', (code, sig) => {
      signal.removeEventListener('abort', onAbort);
      if (signal.aborted) return reject(new GenerationCancelledError());
      if (code === 0) return resolve(stderr);
      reject(new FfmpegError(`ffmpeg exited with ${code ?? sig}: ${lastLines(stderr)}`, stderr));
    });
  });
}

export type VideoDemuxer = 'mov' | 'matroska';

/** ISO BMFF top-level boxes an MP4 or MOV file starts with. */
const BMFF_BOXES = new Set(['ftyp', 'moov', 'mdat', 'free', 'skip', 'wide']);

/**
 * The demuxer for a fetched video, by its first bytes: MP4/MOV (an ISO BMFF box) or WebM/Matroska
 * (the EBML magic); undefined for anything else. ffmpeg's own probing would also take an HLS or
 * concat playlist, whose entries name other files or URLs for ffmpeg to open.
 */
export function videoDemuxer(head: Buffer): VideoDemuxer | undefined {
  if (head.length >= 4 && head.readUInt32BE(0) === 0x1a45dfa3) return 'matroska';
  if (head.length >= 8 && BMFF_BOXES.has(head.toString('latin1', 4, 8))) return 'mov';
  return undefined;
}

/**
 * ffmpeg input options for one untrusted local file: the demuxer forced (no probing into a
 * playlist format) and the `file` protocol only, so nothing in the file can make ffmpeg open a
 * URL, another protocol or a nested playlist.
 */
export function untrustedInput(file: string, demuxer: VideoDemuxer): string[] {
  return ['-protocol_whitelist', 'file', '-f', demuxer, '-i', file];
}

/** Reads duration and frame size of an untrusted video file from ffmpeg's own description of its input. */
export async function probeMedia(
  ffmpegPath: string,
  file: string,
  demuxer: VideoDemuxer,
  signal: AbortSignal,
): Promise<{ durationSeconds?: number; width?: number; height?: number }> {
  let info: string;
  try {
    info = await runFfmpeg(ffmpegPath, untrustedInput(file, demuxer), signal);
  } catch (err) {
    if (!(err instanceof FfmpegError)) throw err;
    // Without an output file ffmpeg exits 1 after printing the input description.
    info = err.stderr;
  }
  const d = /Duration: (\d+):(\d\d):(\d\d(?:\.\d+)?)/.exec(info);
  const v = /Stream #[^\n]*Video:[^\n]*?\b(\d{2,5})x(\d{2,5})\b/.exec(info);
  return {
    durationSeconds: d ? Number(d[1]) * 3600 + Number(d[2]) * 60 + Number(d[3]) : undefined,
    width: v ? Number(v[1]) : undefined,
    height: v ? Number(v[2]) : undefined,
  };
}

function lastLines(text: string, n = 4): string {
  return text.trim().split('\n').slice(-n).join(' | ');
}
