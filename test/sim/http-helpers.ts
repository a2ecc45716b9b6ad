// Shared by the simulator suites: a quiet sim on 127.0.0.1:0 and small HTTP helpers.
import { pino } from 'pino';
import { startSim } from '../../src/sim/server.js';
import type { SimServer, StartSimOptions } from '../../src/sim/server.js';

export const quiet = pino({ level: 'silent' });

export function sim (opts: StartSimOptions = {}): Promise<SimServer> {
  return startSim({ host: '127.0.0.1', port: 0, timeScale: 0, logger: quiet, ...opts });
}

export async function post (url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; text: string; json: any }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json: unknown = null;
  try { json = JSON.parse(text); } catch { /* not JSON (SSE, empty) */ }
  return { status: res.status, text, json };
}

/** The SSE body split into its data payloads. */
export function sseData (text: string): string[] {
  assertFramed(text);
  return text.split('\n\n').filter((e) => e !== '').map((e) => e.slice('data: '.length));
}

function assertFramed (text: string): void {
  if (!text.endsWith('\n\n')) throw new Error(`SSE body does not end with a blank line: ${JSON.stringify(text.slice(-40))}`);
  for (const e of text.split('\n\n').filter((x) => x !== '')) if (!e.startsWith('data: ')) throw new Error(`not an SSE data event: ${e}`);
}

/** A prompt of `n` ASCII letters (n tokens with the character tokenizer), different for every seed. */
export function text (n: number, seed = 0): string {
  let x = (seed * 2654435761 + 1) >>> 0;
  let out = '';
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out += String.fromCharCode(97 + (x >>> 24) % 26);
  }
  return out;
}
