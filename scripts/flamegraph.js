#!/usr/bin/env node
// `npm run flamegraph -- NAME [--seconds S] [--out DIR]`: runs a named load with EAR's process under
// `node --cpu-prof` (every thread, workers included, writes its own profile when it exits) and renders one
// interactive flamegraph per thread with speedscope (a maintained viewer; see docs/profiling.md): the main
// thread, the route pool's threads and the kv-events thread, each named by the EAR entry point found in its
// profile. Loads:
//   soak           `npm run soak` for a minute (engine restarts, reloads, KV events), the gateway profiled
//   gateway-short  bench:gateway's short chat completion, 16 connections, then one-connection rounds
//   gateway-130k   bench:gateway's 130 KB prompt, one connection
//   eval           a short `ear eval --driver des` run (one process: routing host and simulator, no workers)
// Needs `npm run build` first (it runs dist/).
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = (p) => join(root, 'dist', p);

const USAGE = `usage: npm run flamegraph -- NAME [--seconds S] [--out DIR]
  NAME         soak | gateway-short | gateway-130k | eval
  --seconds S  length of the load (default: soak 60, gateway-* 10, eval 120 virtual seconds of arrivals)
  --out DIR    where the profiles and flamegraphs go (default results/flamegraph-NAME-<time>)`;

/** The command of each load: node arguments, with the profile directory and the length filled in. */
const LOADS = {
  soak: (raw, s, out) => [dist('bench/soak.js'), '--minutes', String(s / 60), '--event-every', String(Math.max(10, Math.round(s / 3))),
    '--warmup', '0', '--out', join(out, 'soak'), '--gateway-cpu-prof', raw],
  'gateway-short': (raw, s) => [dist('bench/gateway.js'), '--only-ear', '--no-write', '--ear-cpu-prof', raw, '--loads', 'short',
    '--connections', '16', '--duration', String(s / 2), '--latency-loads', 'short', '--latency-seconds', String(s / 2), '--latency-rounds', '1'],
  'gateway-130k': (raw, s) => [dist('bench/gateway.js'), '--only-ear', '--no-write', '--ear-cpu-prof', raw, '--loads', 'none',
    '--latency-loads', 'long', '--latency-seconds', String(s), '--latency-rounds', '1'],
  eval: (raw, s, out) => ['--cpu-prof', '--cpu-prof-dir', raw, dist('src/cli/ear.js'), 'eval', '--driver', 'des', '--workload', 'agentic',
    '--policies', 'ear', '--engines', '4', '--duration', String(s), '--set', 'kvEvents=precise', '--no-plots', '--out', join(out, 'eval')]
};
const DEFAULT_SECONDS = { soak: 60, 'gateway-short': 10, 'gateway-130k': 10, eval: 120 };

/** EAR's thread entry points, as they appear in a profile's call frames: the thread a profile belongs to. */
// A thread is known by any sampled frame of its entry or of the service that entry starts: the entry's own frames
// are sampled only while its module evaluates (a few ms), which a loaded machine can miss; its service's run for the
// whole load.
const THREADS = [
  ['route-pool', ['/workers/route-worker.js', '/src/features/route-service.js']],
  ['kv-events', ['/workers/kv-events-thread.js', '/src/kvevents/kv-events-service.js']],
  ['migration', ['/workers/migration-thread.js', '/src/migration/migration-service.js']],
  ['http-thread', ['/src/gateway/http-thread.js']]
];

/** `CPU.<date>.<time>.<pid>.<tid>.<seq>.cpuprofile`, as node names them. */
const PROFILE_NAME = /^CPU\.\d+\.\d+\.(\d+)\.(\d+)\.(\d+)\.cpuprofile$/;

function threadOf (profile, tid) {
  if (tid === 0) return 'main';
  const urls = new Set(profile.nodes.map((n) => n.callFrame.url));
  for (const [name, files] of THREADS) if ([...urls].some((u) => files.some((f) => u.endsWith(f)))) return name;
  return 'worker';
}

/**
 * V8 names WebAssembly frames `wasm-function[N]`; the kernels' names are in the build's text form
 * (build/core.wat), one `(func $name` per function in index order (the module imports no function). The
 * profile's frames are renamed `wasm:<file>/<function>` before rendering, so the kernels read as EAR code.
 */
function nameWasmFrames (profile) {
  const wat = join(root, 'build', 'core.wat');
  if (!existsSync(wat)) return;
  const names = [];
  for (const line of readFileSync(wat, 'utf8').split('\n')) {
    const m = /^\s*\((?:import "[^"]*" "[^"]*" \()?func \$(\S+)/.exec(line);
    if (m) names.push(m[1]);
  }
  for (const node of profile.nodes) {
    const m = /^wasm-function\[(\d+)\]$/.exec(node.callFrame.functionName);
    const name = m === null ? undefined : names[Number(m[1])];
    if (name !== undefined) node.callFrame.functionName = `wasm:${name.replace(/^asm\//, '')}`;
  }
}

/** The functions with the most samples of their own: a text companion to the flamegraph. */
function topSelf (profile, n) {
  const self = new Map();
  let total = 0;
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    total += hits;
    const f = node.callFrame;
    const key = `${f.functionName || '(anonymous)'} ${f.url ? basename(f.url) : ''}${f.url ? `:${f.lineNumber + 1}` : ''}`.trim();
    self.set(key, (self.get(key) ?? 0) + hits);
  }
  return { total, top: [...self].sort((a, b) => b[1] - a[1]).slice(0, n) };
}

/**
 * speedscope's viewer (its release folder, copied once) opens a profile named in its URL hash as an absolute
 * file path to a script that hands it the profile: the page NAME.html works that path out from its own
 * location, so the output folder can be moved or copied as a whole.
 */
function render (out, name, profile) {
  const viewer = join(out, 'speedscope');
  if (!existsSync(viewer)) cpSync(join(root, 'node_modules', 'speedscope', 'dist', 'release'), viewer, { recursive: true });
  const data = Buffer.from(JSON.stringify(profile)).toString('base64');
  writeFileSync(join(out, `${name}.js`), `speedscope.loadFileFromBase64(${JSON.stringify(`${name}.cpuprofile`)}, ${JSON.stringify(data)})\n`);
  writeFileSync(join(out, `${name}.html`), `<!doctype html><meta charset="utf-8"><title>${name}: EAR flamegraph</title>
<p>Opening the flamegraph of <b>${name}</b> in speedscope… (press "Left Heavy" for the flamegraph view).</p>
<script>
const here = new URL('.', location.href);
const data = decodeURIComponent(new URL(${JSON.stringify(`${name}.js`)}, here).pathname).replace(/^\\//, '');
location.replace(new URL('speedscope/index.html', here).href + '#view=left-heavy&title=' + encodeURIComponent(${JSON.stringify(name)}) + '&localProfilePath=' + encodeURIComponent(data));
</script>\n`);
  return join(out, `${name}.html`);
}

function main () {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { seconds: { type: 'string' }, out: { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
  const load = positionals[0];
  if (values.help || positionals.length !== 1 || !(load in LOADS)) {
    console.error(USAGE);
    return values.help ? 0 : 2;
  }
  const seconds = values.seconds === undefined ? DEFAULT_SECONDS[load] : Number(values.seconds);
  if (!(seconds > 0)) { console.error(USAGE); return 2; }
  const out = resolve(values.out ?? join(root, 'results', `flamegraph-${load}-${new Date().toISOString().replace(/[:.]/g, '-')}`));
  const raw = join(out, 'cpuprofiles');
  mkdirSync(raw, { recursive: true });
  const args = LOADS[load](raw, seconds, out);
  console.error(`flamegraph ${load}: node ${args.map((a) => a.replace(root, '')).join(' ')}`);
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  // A soak that fails its criteria still leaves good profiles: only a load that did not run is an error.
  if (r.status === null || (r.status !== 0 && !(load === 'soak' && r.status === 1))) {
    console.error(`flamegraph ${load}: the load exited with ${r.status ?? r.signal}`);
    return 1;
  }
  const files = readdirSync(raw).filter((f) => PROFILE_NAME.test(f)).sort();
  const pids = new Set(files.map((f) => PROFILE_NAME.exec(f)[1]));
  const written = [];
  const seen = new Map();
  for (const f of files) {
    const [, pid, tid] = PROFILE_NAME.exec(f);
    const profile = JSON.parse(readFileSync(join(raw, f), 'utf8'));
    nameWasmFrames(profile);
    let name = `${load}-${threadOf(profile, Number(tid))}${pids.size > 1 ? `-pid${pid}` : ''}`;
    const n = (seen.get(name) ?? 0) + 1;
    seen.set(name, n);
    // The route pool has several threads: route-pool-1, route-pool-2, …
    if (name.includes('route-pool') || name.includes('worker') || name.includes('http-thread') || n > 1) name = `${name}-${n}`;
    const html = render(out, name, profile);
    const { total, top } = topSelf(profile, 15);
    const interval = (profile.endTime - profile.startTime) / Math.max(1, profile.samples?.length ?? 1);
    writeFileSync(join(out, `${name}.top.txt`), [`${name} (${f}): ${total} samples, ~${(interval / 1000).toFixed(2)} ms apart; self samples by function:`,
      ...top.map(([k, v]) => `${String(v).padStart(7)}  ${(100 * v / Math.max(1, total)).toFixed(1).padStart(5)}%  ${k}`)].join('\n') + '\n');
    written.push({ name, html, samples: total });
  }
  if (written.length === 0) {
    console.error(`flamegraph ${load}: no profile was written to ${raw}`);
    return 1;
  }
  console.log(`\nflamegraphs (open in a browser; ${join(out, '*.top.txt')} lists the hottest functions):`);
  for (const w of written) console.log(`  ${w.html}  (${w.samples} samples)`);
  console.log(out);
  return 0;
}

process.exitCode = main();
