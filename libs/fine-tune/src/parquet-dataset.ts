import { parquetMetadataAsync, parquetReadObjects, parquetSchema, readOffsetIndex, type AsyncBuffer, type ColumnChunk, type FileMetaData } from 'hyparquet';
// Not re-exported by the package's index; its exports map allows the module itself.
import { parquetHeader } from 'hyparquet/src/column.js';
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

/**
 * What a dataset may make its reader hold, checked before anything is decoded. A Parquet file
 * describes itself: a small file can claim a footer of millions of structs, or row groups whose
 * run-length encoded pages decode to a billion rows.
 */
export interface DatasetLimits {
  /** The footer (the file's metadata, decoded into objects whole). */
  maxFooterBytes: number;
  /** Rows in the file. */
  maxRows: number;
  /** Rows decoded at once: a row group without a page index is decoded whole. */
  maxWindowRows: number;
  /** Uncompressed bytes (as the file declares them) of the columns read, decoded at once. */
  maxWindowBytes: number;
}

export interface ParquetDataset {
  file: AsyncBuffer;
  metadata: FileMetaData;
  /** Top-level column names. */
  columns: string[];
  rows: number;
  limits: DatasetLimits;
}

const MAGIC = 0x31524150; // "PAR1", little-endian

/**
 * Opens a Parquet file by its footer, within `limits`; throws ParquetReadError when it is not
 * readable Parquet or claims more than the limits allow. The footer's length is read (8 bytes)
 * and judged before the footer itself is fetched or decoded.
 */
export async function openParquet(file: AsyncBuffer, limits: DatasetLimits): Promise<ParquetDataset> {
  if (file.byteLength < 12) throw new ParquetReadError(`the file is ${file.byteLength} bytes, too small to be Parquet`);
  const tail = new DataView(await file.slice(file.byteLength - 8, file.byteLength));
  if (tail.getUint32(4, true) !== MAGIC) throw new ParquetReadError('parquet file invalid (footer != PAR1)');
  const footerBytes = tail.getUint32(0, true);
  if (footerBytes > limits.maxFooterBytes)
    throw new ParquetReadError(`its footer (metadata) is ${footerBytes} bytes, more than the ${limits.maxFooterBytes} a dataset may have (DATASET_MAX_FOOTER_BYTES)`);
  let metadata: FileMetaData;
  try {
    metadata = await parquetMetadataAsync(file);
  } catch (err) {
    if (err instanceof ParquetReadError) throw err;
    throw new ParquetReadError((err as Error).message);
  }
  const rows = Number(metadata.num_rows);
  if (!Number.isSafeInteger(rows) || rows < 0) throw new ParquetReadError(`it claims ${String(metadata.num_rows)} rows`);
  if (rows > limits.maxRows) throw new ParquetReadError(`it has ${rows} rows, more than the ${limits.maxRows} a dataset may have (DATASET_MAX_ROWS)`);
  const grouped = metadata.row_groups.reduce((n, g) => n + Number(g.num_rows), 0);
  if (grouped !== rows) throw new ParquetReadError(`it claims ${rows} rows but its row groups hold ${grouped}`);
  const columns = parquetSchema(metadata).children.map((c) => c.element.name);
  return { file, metadata, columns, rows, limits };
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
    checkWindow(dataset.limits, groupStart, groupRows, step, selected);
    const file = await pageGuarded(dataset, selected, pageAddressable, `rows ${groupStart}-${groupStart + groupRows - 1}`);
    for (let start = groupStart; start < groupStart + groupRows; start += step) {
      const end = Math.min(start + step, groupStart + groupRows);
      let rows: Record<string, unknown>[];
      try {
        rows = await parquetReadObjects({
          file,
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

/**
 * The file as the decoder reads this row group's pages: each page header in a slice that starts
 * at a page of the selected columns is read before the decoder sees it, and a page that declares
 * more values than DATASET_MAX_WINDOW_BYTES could hold (8 bytes a value) is refused. The decoder
 * allocates an array of the declared count up front, and run-length encoding lets a page of a
 * few bytes declare billions. No extra read: the slice is the one the decoder asked for (plus,
 * with a page index, the offset index, to know where each page starts).
 */
async function pageGuarded(dataset: ParquetDataset, selected: ColumnChunk[], pageAddressable: boolean, where: string): Promise<AsyncBuffer> {
  const maxValues = Math.floor(dataset.limits.maxWindowBytes / 8);
  const pageStarts = new Set<number>();
  for (const chunk of selected) {
    const meta = chunk.meta_data;
    if (!meta) continue;
    pageStarts.add(Number(meta.dictionary_page_offset ?? meta.data_page_offset));
    pageStarts.add(Number(meta.data_page_offset));
    if (pageAddressable && chunk.offset_index_offset !== undefined && chunk.offset_index_length !== undefined) {
      const at = Number(chunk.offset_index_offset);
      try {
        const index = readOffsetIndex({ view: new DataView(await dataset.file.slice(at, at + chunk.offset_index_length)), offset: 0 });
        for (const page of index.page_locations) pageStarts.add(Number(page.offset));
      } catch (err) {
        if (err instanceof ParquetReadError) throw err;
        throw new ParquetReadError(`${where}: the page index of column ${meta.path_in_schema.join('.')} could not be read: ${(err as Error).message}`);
      }
    }
  }
  const file = dataset.file;
  return {
    byteLength: file.byteLength,
    async slice(start: number, end?: number): Promise<ArrayBuffer> {
      const data = await file.slice(start, end);
      if (pageStarts.has(start)) checkPages(new DataView(data), maxValues, dataset.limits.maxWindowBytes, where);
      return data;
    },
  };
}

/** Walks the page headers from the start of `view` (a run of whole pages), refusing a page that declares too many values. */
function checkPages(view: DataView, maxValues: number, maxWindowBytes: number, where: string): void {
  const reader = { view, offset: 0 };
  while (reader.offset < view.byteLength - 1) {
    let header: ReturnType<typeof parquetHeader>;
    try {
      header = parquetHeader(reader);
    } catch {
      // A page cut off by the slice's end, or not a header: the decoder judges it.
      return;
    }
    const declared = header.data_page_header?.num_values ?? header.data_page_header_v2?.num_values ?? header.dictionary_page_header?.num_values ?? 0;
    if (declared > maxValues || declared < 0)
      throw new ParquetReadError(
        `${where}: a page declares ${declared} values, more than the ${maxValues} that DATASET_MAX_WINDOW_BYTES (${maxWindowBytes}) allows at once; the file is not what it claims`,
      );
    if (!(header.compressed_page_size >= 0)) return;
    reader.offset += header.compressed_page_size;
  }
}

/**
 * Refuses a row group whose windows would decode more than the limits allow: too many rows at
 * once (a group without a page index is decoded whole), or, by the sizes the file declares
 * (what the decoder allocates), too many bytes of the columns read.
 */
function checkWindow(limits: DatasetLimits, groupStart: number, groupRows: number, step: number, selected: ColumnChunk[]): void {
  const where = `rows ${groupStart}-${groupStart + groupRows - 1}`;
  if (step > limits.maxWindowRows)
    throw new ParquetReadError(
      `${where} form one row group of ${groupRows} rows without a page index, more than the ${limits.maxWindowRows} read at once (DATASET_MAX_WINDOW_ROWS); write the file with smaller row groups or a page index`,
    );
  const declared = selected.reduce((n, c) => n + Number(c.meta_data?.total_uncompressed_size ?? 0), 0);
  const windowBytes = groupRows > 0 ? (declared * Math.min(step, groupRows)) / groupRows : 0;
  if (windowBytes > limits.maxWindowBytes)
    throw new ParquetReadError(
      `${where} would decode ${Math.round(windowBytes)} bytes at once, more than the ${limits.maxWindowBytes} allowed (DATASET_MAX_WINDOW_BYTES); write the file with smaller row groups or a page index`,
    );
}
