/**
 * Recognises common media files by their first bytes. Many servers (object stores, CDNs) label
 * media `application/octet-stream`; the bytes say what it really is.
 */
export function sniffMediaType(data: Buffer): string | undefined {
  const ascii = (start: number, end: number) => data.subarray(start, end).toString('latin1');
  if (data.length >= 8 && data.readUInt32BE(0) === 0x89504e47) return 'image/png';
  if (data.length >= 3 && data[0] === 0xff && data[1] === 0xd8 && data[2] === 0xff) return 'image/jpeg';
  if (ascii(0, 4) === 'GIF8') return 'image/gif';
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return 'image/webp';
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WAVE') return 'audio/wav';
  if (ascii(4, 8) === 'ftyp') {
    const brand = ascii(8, 12);
    if (brand === 'avif' || brand === 'avis') return 'image/avif';
    if (brand === 'heic' || brand === 'heix' || brand === 'mif1') return 'image/heic';
    if (brand === 'qt  ') return 'video/quicktime';
    if (brand.startsWith('M4A')) return 'audio/mp4';
    return 'video/mp4';
  }
  if (data.length >= 4 && data.readUInt32BE(0) === 0x1a45dfa3) return 'video/webm';
  if (ascii(0, 3) === 'ID3' || (data.length >= 2 && data[0] === 0xff && (data[1] & 0xe0) === 0xe0)) return 'audio/mpeg';
  if (ascii(0, 4) === 'OggS') return 'audio/ogg';
  const head = ascii(0, 256).trimStart().toLowerCase();
  if (head.startsWith('<svg') || (head.startsWith('<?xml') && head.includes('<svg'))) return 'image/svg+xml';
  return undefined;
}

/** `image/png; charset=x` -> `image/png`. */
export function essence(contentType: string | undefined): string | undefined {
  const value = contentType?.split(';')[0].trim().toLowerCase();
  return value ? value : undefined;
}

/** Does `type` match one of the patterns (`image/png`, `image/*`, `*\/*`)? */
export function matchesAccept(type: string, accept: readonly string[]): boolean {
  return accept.some((pattern) => {
    const p = pattern.trim().toLowerCase();
    if (p === '*/*' || p === '*') return true;
    if (p.endsWith('/*')) return type.startsWith(p.slice(0, -1));
    return type === p;
  });
}

const GENERIC = new Set(['application/octet-stream', 'binary/octet-stream', 'application/binary', 'application/unknown']);

/**
 * The type to trust: a specific declared type wins; a generic or missing one is replaced by
 * what the bytes show.
 */
export function effectiveType(declared: string | undefined, data: Buffer): string {
  const type = essence(declared);
  if (type && !GENERIC.has(type)) return type;
  return sniffMediaType(data) ?? type ?? 'application/octet-stream';
}
