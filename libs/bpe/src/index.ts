export { countInSlices, MAX_RUN_CHARS } from './count-in-slices';
export type { CompactBpe } from './compact-bpe';
export { o200k } from './o200k';
