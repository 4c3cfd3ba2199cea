import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';

/** UI hint and message keywords the catalog may put on any schema node; they do not affect validation. */
export const ANNOTATION_KEYWORDS = ['x-order', 'basic', 'renderType', 'x-error-message'] as const;

const DATA_URI_HEADER = /^data:[\w.+-]+\/[\w.+-]+(?:;[\w.+-]+=[^;,]+)*(?:;base64)?,./;

/**
 * Media inputs are fetched by the server (or decoded inline), so only http(s) URLs and data URIs make sense.
 * The data-URI check only looks at the header because the payload can be megabytes long.
 */
export function isMediaUrl(value: string): boolean {
  if (value.startsWith('data:')) return DATA_URI_HEADER.test(value.slice(0, 512));
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

/** Prices are compared and summed as exact decimals downstream, so the catalog must not hold floats. */
const DECIMAL = /^(?:0|[1-9]\d*)(?:\.\d+)?$/;

export function createAjv(): Ajv2020 {
  // strict stays on so a typo in a catalog schema ("maximun") fails loading instead of being ignored.
  // strictRequired is off because rules like "not both prompt and multi_prompt" list properties in `required`
  // inside not/anyOf/then, where they are deliberately not redefined; strictTypes/strictTuples only warn about style.
  const ajv = new Ajv2020({
    allErrors: true,
    verbose: true,
    useDefaults: true,
    discriminator: true,
    strict: true,
    strictRequired: false,
    strictTypes: false,
    strictTuples: false,
  });
  addFormats(ajv);
  ajv.addVocabulary([...ANNOTATION_KEYWORDS]);
  ajv.addFormat('media-url', isMediaUrl);
  ajv.addFormat('decimal', DECIMAL);
  return ajv;
}

let shared: Ajv2020 | undefined;

/** One instance for catalog and request schemas, created on first use rather than at import time. */
export function sharedAjv(): Ajv2020 {
  shared ??= createAjv();
  return shared;
}
