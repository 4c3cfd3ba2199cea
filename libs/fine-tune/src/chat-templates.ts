import type { ChatFormat } from './base-models';

export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content: string;
  /** Assistant reasoning, when the dataset keeps it apart from the answer. */
  reasoning_content?: string;
}

export const CHAT_ROLES: readonly ChatMessage['role'][] = ['system', 'developer', 'user', 'assistant', 'tool'];

// Python's str.strip/lstrip/rstrip with a character set, as the Jinja templates use them.
const strip = (s: string, chars: string) => rstrip(lstrip(s, chars), chars);
function lstrip(s: string, chars: string): string {
  let i = 0;
  while (i < s.length && chars.includes(s[i])) i++;
  return s.slice(i);
}
function rstrip(s: string, chars: string): string {
  let i = s.length;
  while (i > 0 && chars.includes(s[i - 1])) i--;
  return s.slice(0, i);
}

/**
 * Qwen3's chat template (tokenizer_config.json of the Qwen3 models) for a training sample:
 * no tools, no generation prompt. Assistant turns after the last real user query carry a
 * `<think>` block; the final one always does, even when empty.
 */
function qwen3(messages: ChatMessage[]): string {
  let out = '';
  if (messages[0]?.role === 'system') out += `<|im_start|>system\n${messages[0].content}<|im_end|>\n`;
  let lastQuery = messages.length - 1;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role === 'user' && !(m.content.startsWith('<tool_response>') && m.content.endsWith('</tool_response>'))) {
      lastQuery = i;
      break;
    }
  }
  messages.forEach((m, i) => {
    const role = m.role === 'developer' ? 'system' : m.role;
    if (role === 'user' || (role === 'system' && i !== 0)) {
      out += `<|im_start|>${role}\n${m.content}<|im_end|>\n`;
    } else if (role === 'assistant') {
      let content = m.content;
      let reasoning = '';
      if (typeof m.reasoning_content === 'string') reasoning = m.reasoning_content;
      else if (content.includes('</think>')) {
        const parts = content.split('</think>');
        reasoning = lstrip(rstrip(parts[0], '\n').split('<think>').at(-1)!, '\n');
        content = lstrip(parts.at(-1)!, '\n');
      }
      if (i > lastQuery && (i === messages.length - 1 || reasoning))
        out += `<|im_start|>assistant\n<think>\n${strip(reasoning, '\n')}\n</think>\n\n${lstrip(content, '\n')}`;
      else out += `<|im_start|>assistant\n${content}`;
      out += '<|im_end|>\n';
    } else if (role === 'tool') {
      if (i === 0 || messages[i - 1].role !== 'tool') out += '<|im_start|>user';
      out += `\n<tool_response>\n${m.content}\n</tool_response>`;
      if (i === messages.length - 1 || messages[i + 1].role !== 'tool') out += '<|im_end|>\n';
    }
  });
  return out;
}

/**
 * Llama 3.1 / 3.2 Instruct: a system header with the knowledge cutoff and the template's
 * default date, then one header block per message with trimmed content.
 */
function llama3(messages: ChatMessage[]): string {
  let system = '';
  let rest = messages;
  if (messages[0]?.role === 'system' || messages[0]?.role === 'developer') {
    system = messages[0].content.trim();
    rest = messages.slice(1);
  }
  let out = '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n';
  out += `Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n${system}<|eot_id|>`;
  for (const m of rest) {
    const role = m.role === 'tool' ? 'ipython' : m.role === 'developer' ? 'system' : m.role;
    out += `<|start_header_id|>${role}<|end_header_id|>\n\n${m.role === 'tool' ? m.content : m.content.trim()}<|eot_id|>`;
  }
  return out;
}

/**
 * Llama 4's layout (header per message, trimmed content), written with the Llama 3 special
 * tokens because the count uses the Llama 3 vocabulary (each marker is one token in both).
 */
function llama4(messages: ChatMessage[]): string {
  let out = '<|begin_of_text|>';
  for (const m of messages) {
    const role = m.role === 'tool' ? 'ipython' : m.role === 'developer' ? 'system' : m.role;
    out += `<|start_header_id|>${role}<|end_header_id|>\n\n${m.content.trim()}<|eot_id|>`;
  }
  return out;
}

/**
 * gpt-oss (harmony): the template's default system message, developer instructions from a
 * system/developer message, user turns, and assistant turns on the `final` channel (with an
 * `analysis` turn for reasoning on the last one, which ends in `<|return|>`).
 */
function harmony(messages: ChatMessage[], today: string): string {
  let out =
    '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n' +
    `Knowledge cutoff: 2024-06\nCurrent date: ${today}\n\nReasoning: medium\n\n` +
    '# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>';
  let rest = messages;
  if (messages[0]?.role === 'system' || messages[0]?.role === 'developer') {
    out += `<|start|>developer<|message|># Instructions\n\n${messages[0].content}<|end|>`;
    rest = messages.slice(1);
  }
  rest.forEach((m, i) => {
    const last = i === rest.length - 1;
    if (m.role === 'assistant') {
      if (last && m.reasoning_content) out += `<|start|>assistant<|channel|>analysis<|message|>${m.reasoning_content}<|end|>`;
      out += `<|start|>assistant<|channel|>final<|message|>${m.content}${last ? '<|return|>' : '<|end|>'}`;
    } else if (m.role === 'tool') {
      out += `<|start|>functions to=assistant<|channel|>commentary<|message|>${m.content}<|end|>`;
    } else {
      const role = m.role === 'user' ? 'user' : 'developer';
      out += `<|start|>${role}<|message|>${m.content}<|end|>`;
    }
  });
  return out;
}

/** The training text of one conversation in the base model's chat format. */
export function renderChat(format: ChatFormat, messages: ChatMessage[], today = new Date().toISOString().slice(0, 10)): string {
  switch (format) {
    case 'qwen3':
      return qwen3(messages);
    case 'llama3':
      return llama3(messages);
    case 'llama4':
      return llama4(messages);
    case 'harmony':
      return harmony(messages, today);
  }
}

