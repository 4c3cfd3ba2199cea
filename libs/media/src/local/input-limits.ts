/**
 * The most pixels sharp decodes from a caller's image (4096 x 4096), in every engine: a small
 * PNG or JPEG can declare a huge canvas, and decoding it would take the process's memory.
 */
export const MAX_INPUT_PIXELS = 4096 * 4096;
