/**
 * A chat tool call's JSON `arguments` as an Anthropic tool_use `input`, which must be an object,
 * whatever the model sent: not an object, or not JSON, is kept under `input`.
 */
export function toolInput(args: string): Record<string, unknown> {
  try {
    const parsed = JSON.parse(args === '' ? '{}' : args) as unknown;
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : { input: parsed };
  } catch {
    return { input: args };
  }
}
