import type { AsyncBuffer } from 'hyparquet';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { openParquet, ParquetReadError, readRowWindows, type DatasetLimits } from './parquet-dataset';

const inMemory = (bytes: Uint8Array): AsyncBuffer => ({
  byteLength: bytes.byteLength,
  slice: async (start, end) => bytes.slice(start, end ?? bytes.byteLength).buffer as ArrayBuffer,
});

const limits = (maxWindowBytes: number): DatasetLimits => ({ maxFooterBytes: 1 << 20, maxRows: 1000, maxWindowRows: 1000, maxWindowBytes });

const readAll = async (bytes: Uint8Array, l: DatasetLimits) => {
  const rows: Record<string, unknown>[] = [];
  for await (const window of readRowWindows(await openParquet(inMemory(bytes), l), ['q'])) rows.push(...window.rows);
  return rows;
};

/**
 * A Parquet page declares how many values it holds, and the decoder allocates for that count
 * before decoding: run-length encoding lets a few bytes declare billions. Each page header is
 * read and judged first.
 */
describe('reading a dataset whose pages claim more values than they hold', () => {
  const honest = new Uint8Array(parquetWriteBuffer({ columnData: [{ name: 'q', data: ['first', 'second'], type: 'STRING' }] }));

  /** The same file, its data page claiming 63 values instead of 2 (the varint of num_values rewritten in place). */
  const lying = () => {
    const bytes = honest.slice();
    for (let i = 4; i < bytes.length - 2; i++) {
      // data_page_header (field 5, struct) or data_page_header_v2 (field 8), then its field 1 (i32): zigzag(2) = 4.
      if ((bytes[i] === 0x2c || bytes[i] === 0x5c) && bytes[i + 1] === 0x15 && bytes[i + 2] === 0x04) {
        bytes[i + 2] = 0x7e; // zigzag(63)
        return bytes;
      }
    }
    throw new Error('no data page header found to rewrite');
  };

  it('reads an honest file within the limit', async () => {
    const rows = await readAll(honest, limits(100));
    expect(rows.map((r) => Buffer.from(r.q as Uint8Array).toString())).toEqual(['first', 'second']);
  });

  it('refuses a page declaring more values than DATASET_MAX_WINDOW_BYTES allows, before the decoder allocates for them', async () => {
    const read = readAll(lying(), limits(100));
    await expect(read).rejects.toBeInstanceOf(ParquetReadError);
    await expect(readAll(lying(), limits(100))).rejects.toThrow(/^rows 0-1: a page declares 63 values, more than the 12 that DATASET_MAX_WINDOW_BYTES \(100\) allows at once/);
  });
});
