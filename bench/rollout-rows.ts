// node dist/bench/rollout-rows.js [--runs 3] — how often a rolling update's new pods find every pod row in use and
// wait for one. The case is test/discovery/rolling-update.test.ts's first: 300 fake-engine pods rolled at maxSurge
// 100 with 250 ms minReady and 250 ms between batches, 512 rows (300 + 100 surging + the batch draining), 12
// closed-loop sessions through `ear serve --discovery k8s` (test/fixtures/rolling-update.ts). The design target is
// no wait: the old rows, released by the hundred, are purged in one sweep and free before the next batch needs
// them. Whether they are depends on the machine's pace, so the test counts waits and this reports them, beside
// release → free row and the sweeps. Prints the table and writes it, with the machine and the command, into
// bench/RESULTS.md.
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { classify } from '../test/fixtures/load.js';
import { metric } from '../test/fixtures/processes.js';
import { rollOut, type Rollout } from '../test/fixtures/rolling-update.js';
import { machine, gitCommit } from './machine.js';
import { writeSection } from './results-file.js';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '3' } } });
const RUNS = Number(values.runs);
if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error(`--runs takes a count, got ${values.runs}`);

interface Run { waits: number; failed: number; served: number; reloads: number; freed: number; sweeps: number; meanMs: number; p50: string; p99: string; seconds: number }

const o: Rollout = { replicas: 300, surge: 100, rolls: 1, maxPods: 512, ipBlock: 34 };
const runs: Run[] = [];
const load0 = loadavg()[0];
for (let i = 0; i < RUNS; i++) {
  await rollOut(o, async (r) => {
    const url = r.gw.url;
    const text = await (await fetch(`${url}/metrics`)).text();
    const freed = await metric(url, 'ear_pod_row_free_seconds_count', '');
    const buckets = [...text.matchAll(/^ear_pod_row_free_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])] as const);
    const within = (q: number): string => buckets.find(([, n]) => n >= q * freed)?.[0] ?? '?';
    const c = classify(r.outcomes);
    runs.push({
      waits: await metric(url, 'ear_pod_row_waits_total', ''), failed: r.outcomes.filter((x) => x.error !== null).length, served: c.ok,
      reloads: await metric(url, 'ear_discovery_reloads_total', ''), freed, sweeps: await metric(url, 'ear_kv_purge_sweeps_total', ''),
      meanMs: await metric(url, 'ear_pod_row_free_seconds_sum', '') / freed * 1000, p50: within(0.5), p99: within(0.99), seconds: r.seconds
    });
  });
  const x = runs.at(-1)!;
  console.log(`run ${i + 1}/${RUNS}: ${x.waits} pods waited for a row, ${x.failed} failed of ${x.served + x.failed}, ${x.freed} rows freed in ${x.sweeps} sweeps, mean ${x.meanMs.toFixed(0)} ms, ${x.seconds.toFixed(1)} s`);
}

const rows = runs.map((x, i) => `| ${i + 1} | ${x.waits} | ${x.failed} of ${x.served + x.failed} | ${x.reloads} | ${x.meanMs.toFixed(0)} ms | ≤ ${x.p50} s | ≤ ${x.p99} s | ${x.freed} in ${x.sweeps} | ${x.seconds.toFixed(1)} s |`);
const body = `## Pod rows through a rolling update: new pods waiting for a row (\`node dist/bench/rollout-rows.js\`)

Machine: ${machine()}; load average ${load0.toFixed(1)} at the start, ${loadavg()[0].toFixed(1)} at the end. Commit ${gitCommit()}, ${new Date().toISOString().slice(0, 10)}.
Command: \`npm run build && node dist/bench/rollout-rows.js --runs ${RUNS}\`. ${o.replicas} fake-engine pods rolled once at
maxSurge ${o.surge}, 250 ms minReady (and on until the gateway has taken the batch in) and 250 ms between batches, maxPods ${o.maxPods} (${o.replicas} + ${o.surge} surging + the batch
draining), 12 closed-loop sessions at 5 ms pauses through \`ear serve --discovery k8s\` (test/fixtures/rolling-update.ts).
Target: no new pod waits for a row (\`ear_pod_row_waits_total\` 0). test/discovery/rolling-update.test.ts asserts
what holds on any machine (no request fails, every new pod in service once its row frees, waits counted); this is
where the pace shows.

| run | pods that waited for a row | failed requests | reloads | release → free row, mean | median | p99 | rows freed in sweeps | wall |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${rows.join('\n')}`;
console.log(`\n${body}`);
writeSection('rollout-rows', body);
