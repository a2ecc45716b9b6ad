// How fast one `ear sim` answers when modelled time is free (--time-scale 0): the HTTP, tokenizer and engine
// overhead per request, i.e. the ceiling a time-scaled e2e evaluation can drive one simulated engine at.
// Usage: node dist/bench/sim-server.js [seconds=5] [connections=32] [max_tokens=16] [stream=0]
import { createRequire } from 'node:module';
import { cpus } from 'node:os';
import { pino } from 'pino';
import { startSim } from '../src/sim/server.js';

interface CannonResult { '2xx': number; non2xx: number; errors: number; latency: { p50: number; p99: number } }
// autocannon ships no type declarations.
const autocannon = createRequire(import.meta.url)('autocannon') as (opts: Record<string, unknown>) => Promise<CannonResult>;

const [seconds = 5, connections = 32, maxTokens = 16, stream = 0] = process.argv.slice(2).map(Number);
const sim = await startSim({ host: '127.0.0.1', port: 0, timeScale: 0, stopProbability: 0, logger: pino({ level: 'silent' }) });
let steps = 0;
const step = sim.engine.step.bind(sim.engine);
sim.engine.step = (now) => { steps++; return step(now); };
const prompt = 'You are a coding agent. '.repeat(40);
try {
  const result = await autocannon({
    url: `${sim.url}/v1/completions`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: maxTokens, stream: stream === 1 }),
    connections,
    duration: seconds
  });
  const ok = result['2xx'];
  console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, node ${process.version}`);
  console.log(`ear sim, time-scale 0, ${connections} connections, ${seconds} s, prompt ${prompt.length} chars, max_tokens ${maxTokens}, stream ${stream === 1}`);
  console.log(`requests/s ${(ok / seconds).toFixed(0)}  generated tokens/s ${(ok * maxTokens / seconds).toFixed(0)}  ` +
    `latency p50 ${result.latency.p50} ms p99 ${result.latency.p99} ms  non-2xx ${result.non2xx} errors ${result.errors}  steps ${steps}`);
} finally {
  await sim.close();
}
