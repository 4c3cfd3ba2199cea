export { fnv1a32, pick, randomSeed, range, seededRandom, type Random } from './seeded-random';
export { randomToken } from './random-ids';
