// Reader for shared/traces/mooncake (FAST'25 release): open loop, one JSON object a line (`timestamp` ms,
// `input_length`, `output_length`, `hash_ids`: one id per 512-token block, the last one cut, chained so an id
// stands for its whole prefix, global scope). Sessions are inferred: a request whose hash_ids extend an
// earlier request's full blocks (at least two, past the system block all requests share) continues its
// session. The earlier request's cut last block is left out of the match: completed in the later prompt, its
// content (and so its id) changes.
import { readFileSync } from 'node:fs';
import type { OpenLoopWorkload, OpenRequest } from './types.js';

export interface MooncakeOptions {
  /** Multiplies recorded times: 0.1 replays ten times faster. */
  timeScale: number;
  /** Replay only the first `limit` requests. */
  limit: number | null;
  seed: number;
}

export const MOONCAKE_DEFAULTS: Readonly<MooncakeOptions> = Object.freeze({ timeScale: 1, limit: null, seed: 1 });

const BLOCK = 512;

export function mooncake (file: string, options: Partial<MooncakeOptions> = {}): OpenLoopWorkload {
  const o: MooncakeOptions = { ...MOONCAKE_DEFAULTS, ...options };
  if (!(o.timeScale > 0) || !Number.isFinite(o.timeScale)) throw new RangeError(`mooncake: timeScale must be a finite number > 0, got ${o.timeScale}`);
  if (o.limit !== null && !(Number.isInteger(o.limit) && o.limit >= 0)) throw new RangeError(`mooncake: limit must be an integer ≥ 0, got ${o.limit}`);
  const lines = readFileSync(file, 'utf8').split('\n');

  // Last full block id of each request → (its full blocks, its session): an id stands for its whole prefix.
  const ends = new Map<number, { len: number; session: number }>();
  const sessionBlocks: number[][] = [];
  const sessionTurns: number[] = [];
  const firstBlockSessions = new Map<number, number>();
  const requests: OpenRequest[] = [];
  let prevAt = -Infinity;
  for (let n = 0; n < lines.length && (o.limit === null || requests.length < o.limit); n++) {
    const line = lines[n].trim();
    if (line === '') continue;
    const where = `mooncake ${file}:${n + 1}`;
    let r: { timestamp?: unknown; input_length?: unknown; output_length?: unknown; hash_ids?: unknown };
    try { r = JSON.parse(line); } catch (e) { throw new Error(`${where}: ${(e as Error).message}`); }
    const { timestamp, input_length: input, output_length: output, hash_ids: hashIds } = r;
    if (typeof timestamp !== 'number' || typeof input !== 'number' || typeof output !== 'number' || !Array.isArray(hashIds) ||
        timestamp < 0 || input < 1 || output < 0 || hashIds.some((h) => !Number.isInteger(h) || h < 0 || h > 0xffffffff)) {
      throw new Error(`${where}: want {timestamp ≥ 0, input_length ≥ 1, output_length ≥ 0, hash_ids: [u32]}`);
    }
    if (hashIds.length !== Math.ceil(input / BLOCK)) throw new Error(`${where}: ${hashIds.length} hash_ids for ${input} tokens (want ⌈${input}/${BLOCK}⌉)`);
    const at = (timestamp / 1000) * o.timeScale;
    if (at < prevAt) throw new Error(`${where}: timestamps must not decrease`);
    prevAt = at;
    const ids = hashIds as number[];

    let session = -1;
    for (let i = ids.length - 1; i >= 1 && session < 0; i--) {
      const e = ends.get(ids[i]);
      if (e !== undefined && e.len === i + 1) session = e.session;
    }
    let keep = 0;
    if (session < 0) {
      session = sessionBlocks.length;
      sessionBlocks.push(ids);
      sessionTurns.push(0);
    } else {
      const prev = sessionBlocks[session];
      while (keep < prev.length && keep < ids.length && prev[keep] === ids[keep]) keep++;
      sessionBlocks[session] = ids;
    }
    const full = Math.floor(input / BLOCK);
    if (full >= 2) ends.set(ids[full - 1], { len: full, session });
    if (ids.length > 0) firstBlockSessions.set(ids[0], (firstBlockSessions.get(ids[0]) ?? 0) + (sessionTurns[session] === 0 ? 1 : 0));
    requests.push({
      at, sessionId: `m${session}`, turn: sessionTurns[session]++, final: false, keepBlocks: keep,
      newBlocks: Uint32Array.from(ids.slice(keep)), promptTokens: input, outputTokens: Math.max(1, output),
    });
  }
  const last = new Map<string, number>();
  requests.forEach((r, i) => last.set(r.sessionId, i));
  for (const i of last.values()) (requests[i] as { final: boolean }).final = true;
  // The system block: a first block that starts more than one session.
  const sharedPrefixBlocks = new Set<number>();
  for (const [b, n] of firstBlockSessions) if (n > 1) sharedPrefixBlocks.add(b);
  return { kind: 'open', name: `mooncake:${file}`, blockSize: BLOCK, seed: o.seed, sharedPrefixBlocks, config: { file, ...o }, requests };
}
