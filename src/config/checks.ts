// The checks every config section builds on: each takes the field's path and a raw value (from YAML or a flag,
// where numbers arrive as strings) and returns the value or throws a ConfigError that names the path and the rule.
import { ConfigError } from './config-error.js';

/** A check of one field: its path (for the message) and raw value in, the validated value out. */
export type FieldCheck = (path: string, v: unknown) => unknown;

/** A value as an error message shows it; never a throw (YAML aliases can make a value cyclic, and JSON has no BigInt). */
export function shown (v: unknown): string {
  try {
    const s = JSON.stringify(v) ?? String(v);
    return s.length > 200 ? `${s.slice(0, 200)}…` : s;
  } catch {
    return `a ${Array.isArray(v) ? 'list' : typeof v} that cannot be shown`;
  }
}

export function isMapping (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function checkInt (path: string, v: unknown, min: number, max: number): number {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(path, `must be an integer in [${min}, ${max}], got ${shown(v)}`);
  }
  return n;
}

export function checkNumber (path: string, v: unknown, min: number, max: number): number {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < min || n > max) throw new ConfigError(path, `must be a number in [${min}, ${max}], got ${shown(v)}`);
  return n;
}

export function checkBool (path: string, v: unknown): boolean {
  if (typeof v !== 'boolean') throw new ConfigError(path, `must be true or false, got ${shown(v)}`);
  return v;
}

export function checkString (path: string, v: unknown): string {
  if (typeof v !== 'string' || v === '') throw new ConfigError(path, 'must be a non-empty string');
  return v;
}

export function checkUrl (path: string, v: unknown, schemes: string[]): string {
  if (typeof v !== 'string' || v === '') throw new ConfigError(path, 'must be a non-empty string');
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError(path, `"${v}" is not a URL`);
  }
  if (!schemes.includes(u.protocol)) throw new ConfigError(path, `"${v}" must use ${schemes.join(' or ')}`);
  return v.replace(/\/+$/, '');
}

/** A secret sent in a header: non-empty, printable ASCII without spaces (nothing that could split a header). */
export function checkHeaderValue (path: string, v: unknown): string {
  if (typeof v !== 'string' || !/^[\x21-\x7e]+$/.test(v)) throw new ConfigError(path, 'must be a non-empty string of printable ASCII without spaces');
  return v;
}
