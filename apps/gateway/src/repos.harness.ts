import { randomBytes } from 'node:crypto';
import type { TestHttp, TestResponse } from '@atelier/testing';

export interface MultipartFile {
  field?: string;
  filename: string;
  content: Buffer | string;
  contentType?: string;
}

/** A multipart/form-data body as a browser or curl -F would send it. */
export function multipartBody(files: MultipartFile[], fields: Record<string, string> = {}): { body: Buffer; contentType: string } {
  const boundary = `----atelier${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const [name, value] of Object.entries(fields))
    chunks.push(Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  for (const f of files) {
    chunks.push(
      Buffer.from(
        `--${boundary}\r\ncontent-disposition: form-data; name="${f.field ?? 'file'}"; filename="${f.filename}"\r\n` +
          `content-type: ${f.contentType ?? 'application/octet-stream'}\r\n\r\n`,
      ),
    );
    chunks.push(Buffer.isBuffer(f.content) ? f.content : Buffer.from(f.content));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** PUT /api/repos/{ns}/{repo}/file/{branchAndDir} with the given files. */
export async function uploadFiles(
  http: TestHttp,
  token: string,
  repo: string,
  branchAndDir: string,
  files: MultipartFile[],
  fields: Record<string, string> = {},
): Promise<TestResponse> {
  const { body, contentType } = multipartBody(files, fields);
  return http.request('PUT', `/api/repos/${repo}/file/${branchAndDir}`, { token, rawBody: body, headers: { 'content-type': contentType } });
}
