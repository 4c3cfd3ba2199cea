import { parquetWriteBuffer } from 'hyparquet-writer';

/** The words every question and answer of the QA dataset is made of (a fine-tune's output can be checked against them). */
export const QA_WORDS = ['lighthouse', 'barnacle', 'kelp', 'lantern', 'harbour', 'gull', 'tide', 'foghorn'];

/** A small question/answer dataset (40 rows) as the Parquet file a text_generation fine-tune trains on. */
export function qaDataset(): Buffer {
  const w = QA_WORDS;
  return Buffer.from(
    parquetWriteBuffer({
      columnData: [
        { name: 'question', data: Array.from({ length: 40 }, (_, i) => `Where does the ${w[i % 8]} keeper go at ${w[(i + 3) % 8]} time?`), type: 'STRING' },
        { name: 'answer', data: Array.from({ length: 40 }, (_, i) => `The ${w[(i + 1) % 8]} keeper walks past the ${w[(i + 2) % 8]} and the ${w[(i + 5) % 8]} by the ${w[(i + 6) % 8]}.`), type: 'STRING' },
      ],
    }),
  );
}
