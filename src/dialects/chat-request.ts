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

/**
 * The most tokens any count a client sends may name (max_tokens and the like): 2^31 − 1, vLLM's int32 token
 * counts. Far past any engine's max_model_len, which the pipeline checks next (context-length.ts); what this
 * bound stops is a number no arithmetic downstream should see (9007199254740991, 1e300: an integer to
 * Number.isInteger), refused before anything is charged or sent.
 */
export const MAX_TOKEN_COUNT = 2 ** 31 - 1;

/** An integer in [min, max] (safe, as optInt takes it); null when absent. */
export function optIntIn (b: Doc, key: string, where: string, min: number, max: number): number | null {
  const v = optInt(b, key, where);
  if (v !== null && (v < min || v > max)) throw bad(`"${where}${key}" must be an integer in [${min}, ${max}], got ${shown(v)}`);
  return v;
}

/** A finite number in [min, max] (`open`: min itself excluded, as vLLM's top_p > 0); null when absent. */
export function optNumberIn (b: Doc, key: string, where: string, min: number, max: number, open = false): number | null {
  const v = optNumber(b, key, where);
  if (v !== null && (v < min || v > max || (open && v === min))) {
    throw bad(`"${where}${key}" must be a number in ${open ? '(' : '['}${min}, ${max}], got ${shown(v)}`);
  }
  return v;
}

/**
 * The sampling numbers vLLM bounds (SamplingParams._verify_args), checked where a body names them so that a
 * refusal comes at the door in the API's shape: temperature ≥ 0, top_p in (0, 1], top_k -1 (or 0: off) or more,
 * min_p in [0, 1], presence and frequency penalties in [-2, 2], repetition_penalty > 0, n and best_of in
 * [1, MAX_CHOICES], min_tokens a count, seed a 64-bit integer.
 * Nothing is read that is not there; each API names only some of them.
 */
export function checkSampling (b: Doc, where = ''): void {
  optNumberIn(b, 'temperature', where, 0, Number.MAX_VALUE);
  optNumberIn(b, 'top_p', where, 0, 1, true);
  optIntIn(b, 'top_k', where, -1, MAX_TOKEN_COUNT);
  optNumberIn(b, 'min_p', where, 0, 1);
  optNumberIn(b, 'presence_penalty', where, -2, 2);
  optNumberIn(b, 'frequency_penalty', where, -2, 2);
  optNumberIn(b, 'repetition_penalty', where, 0, Number.MAX_VALUE, true);
  optIntIn(b, 'n', where, 1, MAX_CHOICES);
  optIntIn(b, 'best_of', where, 1, MAX_CHOICES);
  optIntIn(b, 'min_tokens', where, 0, MAX_TOKEN_COUNT);
  // vLLM takes any int64 seed, and EAR computes nothing with it: an integer within int64 (past 2^53 JSON's
  // doubles cannot say which), not 1e300.
  const seed = b.seed;
  if (seed !== undefined && seed !== null && (typeof seed !== 'number' || !Number.isInteger(seed) || Math.abs(seed) > 2 ** 63)) {
    throw bad(`"${where}seed" must be a 64-bit integer, got ${shown(seed)}`);
  }
}

/** The most choices (n, best_of) one request may ask for: each is a whole generation the token charge does not see. */
export const MAX_CHOICES = 128;

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
