// The soak as CI runs it: two minutes of agentic sessions through `ear serve` in front of three `ear sim`
// processes, with an engine restarted and the gateway reloaded meanwhile. The soak's own verdict is asserted
// (exit code and summary), and each criterion on its own so a failure names the one that broke. Two minutes
// cannot resolve a slope of 1 MB per 10 minutes (the soak judges memory only with 10 minutes after warm-up):
// here the memory figures must be reported, and the hour-long run in bench/RESULTS.md judges them.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const soak = fileURLToPath(new URL('../../bench/soak.js', import.meta.url));

interface Summary {
  pass: boolean;
  reasons: string[];
  requests: { sent: number; ok: number; lost: number };
  failures: Record<string, number>;
  memory: { judged: boolean; rssMBPer10Min: number; heapMBPer10Min: number; limitMBPer10Min: number; regionMappedMB: number };
  events: Array<{ what: string; error?: string }>;
  rows: Array<{ minute: number; tables: Record<string, number> }>;
}

test('a 2-minute soak with an engine restart and a reload loses no request', { timeout: 480_000 }, async () => {
  const out = mkdtempSync(join(tmpdir(), 'ear-soak-'));
  let passed = false;
  try {
    const child = spawn(process.execPath, [soak, '--minutes', '2', '--out', out], { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout.on('data', (d: Buffer) => { log += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { log += d.toString(); });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    const s = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as Summary;
    // The run did what a soak is for: traffic, a restart and a reload, a row a minute with the tables.
    assert.ok(s.requests.sent > 100, log);
    assert.ok(s.events.some((e) => e.what.startsWith('restart ')), log);
    assert.ok(s.events.some((e) => e.what === 'reload'), log);
    assert.deepEqual(s.events.filter((e) => e.error !== undefined), [], log);
    assert.ok(s.rows.length >= 2 && s.rows[0].tables.sessions > 0, log);
    // The criteria.
    assert.deepEqual(s.failures, {}, log);
    assert.equal(s.requests.lost, 0, log);
    assert.equal(s.requests.ok, s.requests.sent, log);
    assert.ok(Number.isFinite(s.memory.rssMBPer10Min) && Number.isFinite(s.memory.heapMBPer10Min), log);
    assert.ok(s.memory.regionMappedMB > 0, 'the tables\' region was found in /proc/PID/smaps');
    if (s.memory.judged) {
      assert.ok(s.memory.rssMBPer10Min < s.memory.limitMBPer10Min, `RSS slope ${s.memory.rssMBPer10Min} MB/10 min\n${log}`);
      assert.ok(s.memory.heapMBPer10Min < s.memory.limitMBPer10Min, `heap slope ${s.memory.heapMBPer10Min} MB/10 min\n${log}`);
    }
    // The exit code says the same.
    assert.deepEqual([s.pass, s.reasons, code], [true, [], 0], log);
    passed = true;
  } finally {
    // A failed run's summary (every memory sample) stays for a look.
    if (passed) rmSync(out, { recursive: true, force: true });
    else console.error(`soak output kept in ${out}`);
  }
});
