export { countInSlices, MAX_RUN_CHARS } from './count-in-slices';
