import OpenAI from 'openai';

/** The status and message of the OpenAI SDK error a call ends with; throws if it succeeds or fails otherwise. */
export async function openAiError(promise: Promise<unknown>): Promise<{ status: number | undefined; message: string }> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof OpenAI.APIError) return { status: err.status, message: (err.error as { message?: string } | undefined)?.message ?? err.message };
    throw err;
  }
  throw new Error('expected the request to fail');
}
