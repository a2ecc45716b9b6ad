// Reader for shared/traces/claude-code (kv-cache-tester format): one file is one session of a coding agent.
// hash_ids are 64-token blocks numbered within the file ("local" scope), so each is prefixed with its session;
// the first ⌊(system_tokens + tool_tokens) / 64⌋ blocks of an agent's first prompt are its system + tool
// prompt, one block sequence shared by every session (one for the main agent, one per sub-agent type). The
// tokens after the last full block get a block of their own, unique to the turn. Closed loop on think_time;
// a `subagent` entry becomes a child session launched off the parent's preceding turn. In these traces a
// sub-agent's `t` is when it returned (t − duration_ms is when it started: the three sub-agents of trace_0010
// launched together all start at the end of the same turn) and the parent's next turn waited for it (its
// think_time spans the sub-agent), so by default the next turn joins the sub-agents launched before it and
// its think time is counted from the last of them to return.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { Rng } from './rng.js';
import type { Arrival, ChildLaunch, ClosedLoopWorkload, Session, Turn } from './types.js';

export interface ClaudeCodeOptions {
  /** Poisson session arrival rate (sessions/s), used unless `concurrency` is set. */
  rate: number;
  /** Keep this many sessions running instead. */
  concurrency: number | null;
  /** Replay every file this many times (distinct sessions: no intra-session reuse between copies). */
  copies: number;
  /** The parent's next turn waits for the sub-agents launched before it (false: it follows its think_time). */
  joinSubagents: boolean;
  seed: number;
}

export const CLAUDE_CODE_DEFAULTS: Readonly<ClaudeCodeOptions> = Object.freeze({ rate: 0.1, concurrency: null, copies: 1, joinSubagents: true, seed: 1 });

const BLOCK = 64;

interface RawRequest {
  t: number; type: string; in?: number; out?: number; hash_ids?: number[]; api_time?: number; think_time?: number;
  agent_id?: string; subagent_type?: string; duration_ms?: number; requests?: RawRequest[];
  tool_tokens?: number; system_tokens?: number;
}

class BadTrace extends Error {
  constructor (file: string, message: string) { super(`claude-code trace ${file}: ${message}`); this.name = 'BadTrace'; }
}

function num (v: unknown, file: string, what: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new BadTrace(file, `${what} must be a number ≥ 0, got ${JSON.stringify(v)}`);
  return v;
}

export function claudeCode (dir: string, options: Partial<ClaudeCodeOptions> = {}): ClosedLoopWorkload {
  const o: ClaudeCodeOptions = { ...CLAUDE_CODE_DEFAULTS, ...options };
  if (!(o.rate > 0) || !Number.isFinite(o.rate)) throw new RangeError(`claude-code: rate must be a finite number > 0, got ${o.rate}`);
  if (o.concurrency !== null && !(Number.isInteger(o.concurrency) && o.concurrency > 0)) throw new RangeError(`claude-code: concurrency must be an integer > 0, got ${o.concurrency}`);
  if (!(Number.isInteger(o.copies) && o.copies >= 1)) throw new RangeError(`claude-code: copies must be an integer ≥ 1, got ${o.copies}`);
  if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw new Error(`claude-code: ${dir} is not a directory`);
  const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  if (files.length === 0) throw new Error(`claude-code: no .json trace in ${dir}`);

  const ids = new Map<string, number>();
  let nextBlock = 0;
  const intern = (key: string): number => {
    let v = ids.get(key);
    if (v === undefined) { v = nextBlock++; ids.set(key, v); }
    return v;
  };
  const sharedPrefixBlocks = new Set<number>();

  const parsed = files.map((f) => {
    let j: RawRequest & { id?: string };
    try { j = JSON.parse(readFileSync(join(dir, f), 'utf8')); } catch (e) { throw new BadTrace(f, (e as Error).message); }
    if (!Array.isArray(j.requests)) throw new BadTrace(f, 'no requests array');
    return { file: f, id: typeof j.id === 'string' ? j.id : basename(f, '.json'), root: j };
  });

  /** One agent (main or sub-agent) of one session copy: its turns and its children. */
  const buildSession = (file: string, scope: Map<number, number>, id: string, parentId: string | null, client: string, family: string, raw: RawRequest, start: number): Session => {
    const sharedFull = Math.floor((num(raw.system_tokens ?? 0, file, 'system_tokens') + num(raw.tool_tokens ?? 0, file, 'tool_tokens')) / BLOCK);
    const sharedIds = new Map<number, number>(); // local id → shared block, from the agent's first prompt
    const turns: Turn[] = [];
    const children: Array<{ afterTurn: number; delay: number; session: Session; joinBeforeTurn: number | null }> = [];
    let prev: number[] = [];
    let prevEnd = 0; // recorded end of the preceding turn (t + api_time)
    let joined: number[] = []; // recorded ends of the sub-agents launched since the preceding turn
    for (const r of raw.requests ?? []) {
      if (r.type === 'subagent') {
        const end = num(r.t, file, 'subagent t');
        const began = typeof r.duration_ms === 'number' && r.duration_ms >= 0 ? end - r.duration_ms / 1000 : prevEnd;
        const agent = r.agent_id ?? `sub${children.length}`;
        const child = buildSession(file, scope, `${id}:${agent}`, id, client, `sub:${r.subagent_type ?? 'agent'}`, r, 0);
        children.push({ afterTurn: turns.length - 1, delay: Math.max(0, began - prevEnd), session: child, joinBeforeTurn: null });
        joined.push(end);
        continue;
      }
      const hashIds = r.hash_ids;
      if (!Array.isArray(hashIds)) throw new BadTrace(file, `request of type ${r.type} at t=${r.t} has no hash_ids`);
      const promptTokens = num(r.in, file, 'in');
      if (hashIds.length * BLOCK > promptTokens) throw new BadTrace(file, `${hashIds.length} blocks of ${BLOCK} exceed in=${promptTokens}`);
      if (turns.length === 0) for (let i = 0; i < Math.min(sharedFull, hashIds.length); i++) sharedIds.set(hashIds[i], intern(`shared:${family}:${i}`));
      const blocks = hashIds.map((h) => {
        const s = sharedIds.get(h);
        if (s !== undefined) { sharedPrefixBlocks.add(s); return s; }
        let v = scope.get(h);
        if (v === undefined) { v = nextBlock++; scope.set(h, v); }
        return v;
      });
      if (promptTokens > blocks.length * BLOCK) blocks.push(nextBlock++); // the cut last block, unique to this turn
      let keep = 0;
      while (keep < prev.length && keep < blocks.length && prev[keep] === blocks[keep]) keep++;
      const t = num(r.t, file, 't');
      const apiTime = typeof r.api_time === 'number' && r.api_time >= 0 ? r.api_time : 0;
      let thinkTime = turns.length === 0 ? 0 : num(r.think_time ?? 0, file, 'think_time');
      if (o.joinSubagents && joined.length > 0 && turns.length > 0) {
        for (const c of children) if (c.afterTurn === turns.length - 1) c.joinBeforeTurn = turns.length;
        thinkTime = Math.max(0, t - Math.max(prevEnd, ...joined));
      }
      joined = [];
      turns.push({
        keepBlocks: keep,
        newBlocks: Uint32Array.from(blocks.slice(keep)),
        promptTokens,
        outputTokens: Math.max(1, Math.round(num(r.out ?? 0, file, 'out'))),
        thinkTime,
        nominalServiceTime: apiTime,
      });
      prev = blocks;
      prevEnd = t + apiTime;
    }
    return { id, parentId, client, start, turns, children: children as ChildLaunch[] };
  };

  const arrivals = new Rng(o.seed, 11);
  const sessions: Session[] = [];
  let t = 0;
  for (let c = 0; c < o.copies; c++) {
    for (const p of parsed) {
      const id = o.copies > 1 ? `${p.id}#${c}` : p.id;
      const start = o.concurrency !== null ? 0 : (t += arrivals.exponential(o.rate));
      // One local block space per session copy, shared by its sub-agents (they number blocks in the same file).
      sessions.push(buildSession(p.file, new Map(), id, null, p.id, 'main', p.root, start));
    }
  }
  const arrival: Arrival = o.concurrency !== null ? { mode: 'concurrency', n: o.concurrency } : { mode: 'poisson', rate: o.rate };
  return { kind: 'closed', name: `claude-code:${dir}`, blockSize: BLOCK, seed: o.seed, sharedPrefixBlocks, config: { dir, ...o }, sessions, arrival };
}
