// Where a cold 130 KB chat prompt's gateway time goes, piece by piece and outside the server (no sockets):
// the route worker's parse, render, encode and block hashing; the structured clones to and from the worker; the
// main thread's route (longest prefix against a warm index, fed by the real kv-events thread) and dispatch
// (the keys recorded on the ring). The numbers behind the 130 KB part of bench-gateway's "What stands in the
// way". Prints only. Run: `npm run build && node dist/bench/gateway-split.js [--tokenizer character]`.
import { parseArgs } from 'node:util';
import { BlockHasher } from '../src/core/block-keys.js';
import { createPolicy } from '../src/core/policies/index.js';
import { createRegion, Region } from '../src/core/region.js';
import type { Backend } from '../src/fleet/backends.js';
import { computeFeatures } from '../src/features/features.js';
import { parseRequestBody } from '../src/features/request-body.js';
import { SessionFeatures } from '../src/features/session-features.js';
import type { RoutingInput } from '../src/fleet/routing-port.js';
import { TableRouting } from '../src/fleet/table-routing.js';
import { startKvEventsThread } from '../src/kvevents/kv-events-thread.js';
import { createTokenizerSync } from '../src/tokenize/index.js';
import { BENCH_MODEL } from './upstream.js';

const { values } = parseArgs({ options: { tokenizer: { type: 'string', default: 'character' }, kb: { type: 'string', default: '130' } } });
const BLOCK = 16;
const line = 'The gateway reads this file, tokenizes it and hashes its blocks before it picks an engine. ';
const bytes = Number(values.kb) * 1024;
const text = line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes);
const body = Buffer.from(JSON.stringify({ model: BENCH_MODEL, stream: false, messages: [{ role: 'user', content: text }], max_tokens: 32 }));

const shared = createRegion({ scratchSlots: 14 });
const region = new Region(shared);
const tokenizer = createTokenizerSync(values.tokenizer);
const hasher = new BlockHasher(region);

/** Mean ms of f over 30 calls after 5 warm-up calls. */
function time<T> (name: string, f: () => T): T {
  let r = f();
  for (let i = 0; i < 4; i++) r = f();
  const t0 = performance.now();
  for (let i = 0; i < 30; i++) r = f();
  console.log(`${name.padEnd(44)} ${((performance.now() - t0) / 30).toFixed(3)} ms`);
  return r;
}

const p = time('worker: parse the body', () => parseRequestBody('chat', body));
const rendered = time('worker: render the chat', () => tokenizer.chatTemplate.render(p.messages!, p.render));
const ids = time('worker: encode (number[])', () => tokenizer.encode(rendered, { addSpecialTokens: false }));
const seed = hasher.rootSeed(p.model, null, p.cacheSalt);
const keys = time('worker: hash blocks from the number[]', () => hasher.hash(ids, BLOCK, seed).keys.slice());
// What the worker runs when the tokenizer has encodeIds (character does): a Uint32Array, hashed in one copy.
const u32 = time('worker: encode (Uint32Array, encodeIds)', () => tokenizer.encodeIds?.(rendered) ?? Uint32Array.from(ids));
time('worker: hash blocks from the Uint32Array', () => hasher.hash(u32, BLOCK, seed).keys.slice());
time('clone: the task to the worker', () => structuredClone({ endpoint: 'chat', body, sessionId: null }));
time('clone: the features back', () => structuredClone({ ok: true, features: { model: p.model, blockKeys: keys }, startedAt: 0 }));

// A session turn: the previous turn plus ~2k tokens (an assistant reply, a new user message), and back.
const head = text.slice(0, bytes - 2048);
const turnA = Buffer.from(JSON.stringify({ model: BENCH_MODEL, stream: false, messages: [{ role: 'user', content: head }], max_tokens: 32 }));
const turnB = Buffer.from(JSON.stringify({ model: BENCH_MODEL, stream: false, messages: [{ role: 'user', content: head }, { role: 'assistant', content: 'Read it. What next?' }, { role: 'user', content: text.slice(0, 2008) }], max_tokens: 32 }));
const ctx = { tokenizer, hasher, blockSize: BLOCK, sessions: new SessionFeatures(tokenizer) };
let turn = 0;
time('worker: session turn, ±2k tokens (features)', () => computeFeatures(ctx, 'chat', turn++ % 2 === 0 ? turnA : turnB, 'bench-session'));
console.log(ctx.sessions.stats());

// The main thread's part, against an index that holds the prompt (as after its first request).
const kv = startKvEventsThread(shared, { assumedTtlMs: 20 * 60_000, blockSize: BLOCK, maxMappedBlocks: 1 << 20 });
const backend = { index: 0, id: 'up', config: { role: 'both' }, models: new Set([BENCH_MODEL]), serves: () => true, draining: false, health: 'healthy' } as unknown as Backend;
const routing = new TableRouting(region, createPolicy('sticky'), { blockSize: BLOCK, sessionTtlMs: 30 * 60_000 });
routing.admit('up');
routing.backendChanged(backend, 0);
const input: RoutingInput = { model: BENCH_MODEL, sessionId: null, parentSessionId: null, promptTokens: ids.length, blockKeys: keys, maxTokens: 32, user: null };
const first = routing.route(input, new Set(), Date.now());
routing.started(first, input, Date.now());
await new Promise((r) => setTimeout(r, 200)); // the kv-events thread applies the recorded keys
console.log(`blocks ${keys.length}, indexed ${routing.tableStats()[0].entries}`);
time('main: route (longest prefix + policy)', () => routing.route(input, new Set(), Date.now()));
time('main: route + dispatch (record the keys)', () => {
  const pl = routing.route(input, new Set(), Date.now());
  routing.started(pl, input, Date.now());
  routing.finished(pl, input, null, true, Date.now());
});
await kv.stop();
