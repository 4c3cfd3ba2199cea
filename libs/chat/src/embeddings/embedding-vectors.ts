/** Embedding vectors on the wire: little-endian float32, base64 (OpenAI's `encoding_format: "base64"`). */

export function vectorToBase64(vector: Float32Array | readonly number[]): string {
  const floats = vector instanceof Float32Array ? vector : Float32Array.from(vector);
  const bytes = Buffer.alloc(floats.length * 4);
  for (let i = 0; i < floats.length; i++) bytes.writeFloatLE(floats[i], i * 4);
  return bytes.toString('base64');
}

export function base64ToVector(encoded: string): number[] {
  const bytes = Buffer.from(encoded, 'base64');
  const out = new Array<number>(bytes.length >>> 2);
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4);
  return out;
}

/**
 * A vector shortened to `dimensions` and normalised again: how models trained for it
 * (Matryoshka) shorten theirs, and what OpenAI's `dimensions` does.
 */
export function shortened(vector: Float32Array, dimensions: number): Float32Array {
  if (dimensions >= vector.length) return vector;
  const out = vector.slice(0, dimensions);
  let norm = 0;
  for (const x of out) norm += x * x;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < out.length; i++) out[i] /= norm;
  return out;
}
