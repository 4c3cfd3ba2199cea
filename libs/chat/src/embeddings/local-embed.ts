/**
 * local-embed: a deterministic, offline embedding for laptops and tests, and honest about what it
 * is. It is feature hashing, not a neural model: each text's word unigrams and bigrams and its
 * words' character trigrams are hashed (FNV-1a) into `dimensions` signed buckets, weighted by
 * log(1 + count), and the vector is L2-normalised. Texts that share words and word pieces get
 * a higher cosine similarity than unrelated ones; synonyms do not. Token id inputs hash their
 * ids and id bigrams the same way.
 */

function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

function features(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  const add = (feature: string, weight: number) => counts.set(feature, (counts.get(feature) ?? 0) + weight);
  const words = text.toLowerCase().normalize('NFKC').match(/[\p{L}\p{N}]+/gu) ?? [];
  words.forEach((word, i) => {
    add(`w:${word}`, 1);
    if (i > 0) add(`b:${words[i - 1]} ${word}`, 1);
    const padded = `<${word}>`;
    // Pieces weigh less than whole words, so shared words dominate shared spelling.
    for (let j = 0; j + 3 <= padded.length; j++) add(`c:${padded.slice(j, j + 3)}`, 0.5);
  });
  return counts;
}

function tokenFeatures(tokens: readonly number[]): Map<string, number> {
  const counts = new Map<string, number>();
  tokens.forEach((token, i) => {
    counts.set(`t:${token}`, (counts.get(`t:${token}`) ?? 0) + 1);
    if (i > 0) counts.set(`tb:${tokens[i - 1]} ${token}`, (counts.get(`tb:${tokens[i - 1]} ${token}`) ?? 0) + 1);
  });
  return counts;
}

/** The vector of one input, `dimensions` long, of unit length (all zeros for an input without features). */
export function localEmbedding(input: string | readonly number[], dimensions: number): Float32Array {
  const vector = new Float32Array(dimensions);
  const counts = typeof input === 'string' ? features(input) : tokenFeatures(input);
  for (const [feature, count] of counts) {
    const hash = fnv1a(feature);
    // The top bit signs the feature, so colliding features cancel rather than pile up.
    vector[hash % dimensions] += (hash & 0x80000000 ? -1 : 1) * Math.log1p(count);
  }
  let norm = 0;
  for (const x of vector) norm += x * x;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < dimensions; i++) vector[i] /= norm;
  return vector;
}
