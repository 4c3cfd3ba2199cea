import { parquetMetadataAsync, parquetReadObjects, parquetSchema, type AsyncBuffer, type FileMetaData } from 'hyparquet';
import type { BlobStore } from '@atelier/storage';

/** Rows read per step when a row group's pages can be addressed (offset index present). */
const WINDOW_ROWS = 4096;

export class ParquetReadError extends Error {}

/**
 * A blob as hyparquet's AsyncBuffer: every slice is a ranged read, so only the footer and
 * the column chunks actually needed are ever fetched (never the whole file).
 */
export function blobAsyncBuffer(blobs: BlobStore, key: string, size: number): AsyncBuffer {
  return {
    byteLength: size,
    async slice(start: number, end?: number): Promise<ArrayBuffer> {
      const to = end ?? size;
      const buf = await blobs.readRange(key, start, to);
      if (!buf) throw new ParquetReadError('the file disappeared while it was being read');
      if (buf.length !== to - start) throw new ParquetReadError(`short read: wanted ${to - start} bytes at ${start}, got ${buf.length}`);
      return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) as ArrayBuffer;
    },
  };
}

export interface ParquetDataset {
  file: AsyncBuffer;
  metadata: FileMetaData;
  /** Top-level column names. */
  columns: string[];
  rows: number;
}

/** Opens a Parquet file by its footer; throws ParquetReadError when it is not readable Parquet. */
export async function openParquet(file: AsyncBuffer): Promise<ParquetDataset> {
  if (file.byteLength < 12) throw new ParquetReadError(`the file is ${file.byteLength} bytes, too small to be Parquet`);
  let metadata: FileMetaData;
  try {
    metadata = await parquetMetadataAsync(file);
  } catch (err) {
    if (err instanceof ParquetReadError) throw err;
    throw new ParquetReadError((err as Error).message);
  }
  const columns = parquetSchema(metadata).children.map((c) => c.element.name);
  return { file, metadata, columns, rows: Number(metadata.num_rows) };
}

export interface RowWindow {
  /** Zero-based index of the first row in the file. */
  rowStart: number;
  rows: Record<string, unknown>[];
}

/**
 * Yields the rows of the given columns window by window, in file order. Memory is bounded by
 * one window: a row group is read in page-aligned windows when the file has an offset index,
 * otherwise one row group at a time (Parquet cannot address rows inside a chunk without one).
 */
export async function* readRowWindows(dataset: ParquetDataset, columns: string[]): AsyncGenerator<RowWindow> {
  let groupStart = 0;
  for (const group of dataset.metadata.row_groups) {
    const groupRows = Number(group.num_rows);
    const selected = group.columns.filter((c) => c.meta_data && columns.includes(c.meta_data.path_in_schema[0]));
    const pageAddressable = selected.length > 0 && selected.every((c) => c.offset_index_offset !== undefined);
    const step = pageAddressable ? WINDOW_ROWS : groupRows;
    for (let start = groupStart; start < groupStart + groupRows; start += step) {
      const end = Math.min(start + step, groupStart + groupRows);
      let rows: Record<string, unknown>[];
      try {
        rows = await parquetReadObjects({
          file: dataset.file,
          metadata: dataset.metadata,
          columns,
          rowStart: start,
          rowEnd: end,
          // Binary columns without a string annotation (image bytes) stay bytes.
          utf8: false,
          useOffsetIndex: pageAddressable,
        });
      } catch (err) {
        if (err instanceof ParquetReadError) throw err;
        throw new ParquetReadError(`rows ${start}-${end - 1} could not be decoded: ${(err as Error).message}`);
      }
      yield { rowStart: start, rows };
    }
    groupStart += groupRows;
  }
}
