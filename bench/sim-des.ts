// Discrete-event speed of the simulator core: virtual seconds simulated per wall second, for 16 engines with
// the h20-qwen3-coder profile under a closed-loop agentic load. Each session is pinned to one engine (the
// routing policy is not what is measured here); turn k's prompt = turn k−1's prompt + its output + a tool
// result, the next turn is sent a log-normal tool delay after the response, and a finished session is replaced
// by a new one. Prompts are token ids; the host passes each prompt's block hashes, reused from the turn before.
// Target (specs/evaluation.md): a 600 s trace in under 10 s of wall time.
//   node dist/bench/sim-des.js [--seconds 600] [--engines 16] [--sessions-per-engine 6] [--seed 1]
import { cpus, loadavg } from 'node:os';
import { pathToFileURL } from 'node:url';
import { DesHost } from '../src/sim/des.js';
import { machine, gitCommit } from './machine.js';
import { writeSection } from './results-file.js';
import { loadProfile } from '../src/engine-model/profile.js';
import type { BlockDigest } from '../src/sim/block-hash.js';

export interface SimDesOptions {
  seconds: number;
  engines: number;
  sessionsPerEngine: number;
  seed: number;
  /** Shared system + tool prompt of every session of a client (tokens). */
  systemTokens: number;
  /** First user message (tokens). */
  firstUserTokens: number;
  /** Mean tool result appended per turn (tokens). */
  toolResultTokens: number;
  /** Mean output per turn (tokens). */
  outputTokens: number;
  turnsPerSession: number;
  /** Median tool delay (seconds), log-normal with σ = 0.6. */
  toolDelayMedian: number;
  clients: number;
}

export interface SimDesFigures {
  virtualSeconds: number;
  wallSeconds: number;
  /** CPU time of this process over the run (user + system): the fairer figure on a shared machine. */
  cpuSeconds: number;
  /** Virtual seconds per wall second. */
  speed: number;
  engines: number;
  sessionsStarted: number;
  requestsCompleted: number;
  meanPromptTokens: number;
  cachedTokenShare: number;
  outputTokens: number;
  engineSteps: number;
  preemptions: number;
  meanTtft: number;
}

export const DEFAULTS: SimDesOptions = {
  seconds: 600,
  engines: 16,
  sessionsPerEngine: 6,
  seed: 1,
  systemTokens: 8000,
  firstUserTokens: 7200,
  toolResultTokens: 1500,
  outputTokens: 450,
  turnsPerSession: 21,
  toolDelayMedian: 3,
  clients: 8
};

export function runSimDes (o: SimDesOptions = DEFAULTS): SimDesFigures {
  const t0 = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  const des = new DesHost({ seed: o.seed });
  const profile = loadProfile('h20-qwen3-coder');
  for (let i = 0; i < o.engines; i++) des.addEngine({ profile });
  const hasher = des.engines[0].hasher;
  const rnd = (): number => des.random();
  // Built by push so the arrays stay packed (concat and slice then copy them as flat memory).
  const tokens = (n: number): number[] => { const a: number[] = []; for (let i = 0; i < n; i++) a.push(100 + Math.floor(rnd() * 150000)); return a; };
  const normal = (): number => Math.sqrt(-2 * Math.log(1 - rnd())) * Math.cos(2 * Math.PI * rnd());
  const around = (mean: number): number => Math.max(1, Math.round(mean * Math.exp(0.5 * normal() - 0.125)));
  const systems = Array.from({ length: o.clients }, () => tokens(o.systemTokens));

  let sessions = 0;
  let completed = 0;
  let promptSum = 0;
  let cachedSum = 0;
  let outputSum = 0;
  let ttftSum = 0;

  const startSession = (engine: number, at: number): void => {
    const s = sessions++;
    let prompt = [...systems[s % o.clients], ...tokens(around(o.firstUserTokens))];
    let digests: BlockDigest[] = [];
    const turn = (k: number, t: number): void => {
      // The host hashes only the blocks this turn added; the engine trusts the digests it is given.
      digests = hasher.extend(digests, prompt, null, null);
      const outputs: number[] = [];
      des.submit(engine, {
        id: `s${s}t${k}`, promptTokenIds: prompt, maxTokens: around(o.outputTokens), minTokens: 0, ignoreEos: true,
        stopTokenIds: [], loraName: null, cacheSalt: null, seed: s * 1000 + k, arrivalTime: t, blockHashes: digests
      }, t, {
        onTokens: (_t, out) => { for (const x of out.newTokenIds) outputs.push(x); },
        onFinish: (end, out) => {
          completed++;
          promptSum += prompt.length;
          cachedSum += out.numCachedTokens;
          outputSum += outputs.length;
          ttftSum += out.metrics!.firstTokenTime - out.metrics!.arrivalTime;
          if (k + 1 >= o.turnsPerSession) { startSession(engine, end); return; }
          prompt = prompt.concat(outputs, tokens(around(o.toolResultTokens)));
          const delay = o.toolDelayMedian * Math.exp(0.6 * normal());
          des.at(end + delay, (t2) => turn(k + 1, t2));
        }
      });
    };
    turn(0, at);
  };

  for (let e = 0; e < o.engines; e++) for (let j = 0; j < o.sessionsPerEngine; j++) startSession(e, rnd() * 10);
  des.run(o.seconds);
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  let preemptions = 0;
  for (const e of des.engines) preemptions += e.stats().preemptions;
  return {
    virtualSeconds: o.seconds,
    wallSeconds: wall,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    speed: o.seconds / wall,
    engines: o.engines,
    sessionsStarted: sessions,
    requestsCompleted: completed,
    meanPromptTokens: completed === 0 ? 0 : promptSum / completed,
    cachedTokenShare: promptSum === 0 ? 0 : cachedSum / promptSum,
    outputTokens: outputSum,
    engineSteps: des.steps,
    preemptions,
    meanTtft: completed === 0 ? 0 : ttftSum / completed
  };
}

function parseArgs (argv: string[]): SimDesOptions {
  const o = { ...DEFAULTS };
  const keys: Record<string, keyof SimDesOptions> = { '--seconds': 'seconds', '--engines': 'engines', '--sessions-per-engine': 'sessionsPerEngine', '--seed': 'seed' };
  for (let i = 0; i < argv.length; i += 2) {
    const k = keys[argv[i]];
    const v = Number(argv[i + 1]);
    if (k === undefined || !Number.isFinite(v) || v <= 0) throw new RangeError(`usage: node dist/bench/sim-des.js [--seconds N] [--engines N] [--sessions-per-engine N] [--seed N] (bad ${argv[i]} ${argv[i + 1]})`);
    o[k] = v as never;
  }
  return o;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const o = parseArgs(process.argv.slice(2));
  const f = runSimDes(o);
  console.log(`machine: ${cpus()[0]?.model ?? 'unknown'} ×${cpus().length}, node ${process.version}`);
  console.log(`command: node dist/bench/sim-des.js ${process.argv.slice(2).join(' ')}`.trim());
  console.log(`load: ${o.engines} engines h20-qwen3-coder, ${o.sessionsPerEngine} closed-loop sessions per engine, ${o.turnsPerSession} turns, tool delay median ${o.toolDelayMedian} s`);
  console.log(`requests ${f.requestsCompleted}, mean prompt ${Math.round(f.meanPromptTokens)} tokens, cached share ${(100 * f.cachedTokenShare).toFixed(1)}%, ` +
    `output ${f.outputTokens} tokens, engine steps ${f.engineSteps}, preemptions ${f.preemptions}, mean TTFT ${f.meanTtft.toFixed(3)} s`);
  console.log(`DES speed: ${f.virtualSeconds} virtual s in ${f.wallSeconds.toFixed(2)} wall s (${f.cpuSeconds.toFixed(2)} CPU s, load average ${loadavg()[0].toFixed(1)}) = ${f.speed.toFixed(1)} virtual s per wall s ` +
    `(target: ${f.virtualSeconds} s in < 10 s: ${f.wallSeconds < 10 ? 'met' : 'NOT met'})`);
  writeSection('bench-sim', [
    '## Discrete-event simulator speed (`npm run bench:sim`)',
    '',
    `Machine: ${machine()}. Commit ${gitCommit()}, ${new Date().toISOString().slice(0, 10)}, load average ${loadavg()[0].toFixed(1)} at the end.`,
    `Command: \`npm run build && node dist/bench/sim-des.js ${process.argv.slice(2).join(' ')}\`.`.replace(' `.', '`.'),
    `Load: ${o.engines} engines of h20-qwen3-coder, ${o.sessionsPerEngine} closed-loop agentic sessions per engine (${o.turnsPerSession} turns, tool delay median ${o.toolDelayMedian} s), ` +
      `mean prompt ${Math.round(f.meanPromptTokens)} tokens, ${(100 * f.cachedTokenShare).toFixed(1)}% of prompt tokens cached; ${f.requestsCompleted} requests, ${f.engineSteps} engine steps.`,
    '',
    '| virtual s | wall s | CPU s | virtual s per wall s | target (600 s in < 10 s) |',
    '|---:|---:|---:|---:|---|',
    `| ${f.virtualSeconds} | ${f.wallSeconds.toFixed(2)} | ${f.cpuSeconds.toFixed(2)} | ${f.speed.toFixed(1)} | ${f.wallSeconds < 10 ? 'met' : '**not met**'} |`,
    '',
    'Wall time on this shared 2-core machine follows its load; CPU time is the steadier figure.'
  ].join('\n'));
}
