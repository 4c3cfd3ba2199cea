export { fnv1a32, pick, randomSeed, range, seededRandom, type Random } from './seeded-random';
export { randomToken } from './random-ids';
export { uuidV7, uuidV7Time } from './uuid-v7';
