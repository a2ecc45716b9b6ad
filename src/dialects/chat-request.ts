// What every API dialect turns into: the chat request vLLM builds from an Anthropic Messages or OpenAI Responses
// body before it applies the chat template, so that EAR renders the prompt tokens the engine will. Shared field
// checks for the dialects' validators live here too. Pure: no I/O, no clock.
import { EarError } from '../errors/errors.js';
import type { ChatMessage, RenderOptions } from '../tokenize/types.js';

export interface ChatRequest {
  model: string;
  stream: boolean;
  /** The conversation in OpenAI chat format, as vLLM hands it to its chat-message parser. */
  messages: ChatMessage[];
  /** addGenerationPrompt, tools (OpenAI chat format), chatTemplateKwargs when any. */
  render: RenderOptions;
  maxTokens: number | null;
  /** Whom fairness policies count the tokens against; null when absent or empty. */
  user: string | null;
}

export type Doc = Record<string, unknown>;

export function bad (message: string): EarError {
  return new EarError('EAR_ERR_BAD_REQUEST', message);
}

/** A client's value as an error message shows it: short, and never a throw (deep nesting overflows JSON.stringify). */
export function shown (v: unknown): string {
  try {
    const s = JSON.stringify(v) ?? String(v);
    return s.length > 120 ? `${s.slice(0, 120)}…` : s;
  } catch {
    return 'a value nested too deeply to show';
  }
}

export const isObject = (v: unknown): v is Doc => typeof v === 'object' && v !== null && !Array.isArray(v);
const absent = (v: unknown): v is null | undefined => v === undefined || v === null;

export function requireObject (v: unknown, what: string): Doc {
  if (!isObject(v)) throw bad(`${what} must be a JSON object`);
  return v;
}

export function optString (b: Doc, key: string, where: string): string | null {
  const v = b[key];
  if (absent(v)) return null;
  if (typeof v !== 'string') throw bad(`"${where}${key}" must be a string, got ${shown(v)}`);
  return v;
}

export function optBool (b: Doc, key: string, where: string): boolean | null {
  const v = b[key];
  if (absent(v)) return null;
  if (typeof v !== 'boolean') throw bad(`"${where}${key}" must be a boolean, got ${shown(v)}`);
  return v;
}

export function optNumber (b: Doc, key: string, where: string): number | null {
  const v = b[key];
  if (absent(v)) return null;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw bad(`"${where}${key}" must be a number, got ${shown(v)}`);
  return v;
}

/** An integer as pydantic's lax mode takes it (5 and 5.0, not 5.5 nor "5"). */
export function optInt (b: Doc, key: string, where: string): number | null {
  const v = b[key];
  if (absent(v)) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw bad(`"${where}${key}" must be an integer, got ${shown(v)}`);
  return v;
}

export function optObject (b: Doc, key: string, where: string): Doc | null {
  const v = b[key];
  if (absent(v)) return null;
  if (!isObject(v)) throw bad(`"${where}${key}" must be an object, got ${shown(v)}`);
  return v;
}

export function optArray (b: Doc, key: string, where: string): unknown[] | null {
  const v = b[key];
  if (absent(v)) return null;
  if (!Array.isArray(v)) throw bad(`"${where}${key}" must be an array, got ${shown(v)}`);
  return v;
}

export function optStringList (b: Doc, key: string, where: string): string[] | null {
  const v = optArray(b, key, where);
  if (v === null) return null;
  for (const [i, s] of v.entries()) if (typeof s !== 'string') throw bad(`"${where}${key}[${i}]" must be a string, got ${shown(s)}`);
  return v as string[];
}
