// bench/owner-ceiling.ts as a user runs it, briefly: its load generators stand in for data-plane threads and speak
// the owner protocol (src/gateway/owner-protocol.ts) to the real owner. A change to the protocol that the
// generators do not follow shows here as a run that decides nothing (or hangs), not first on the many-core machine.
// The figures themselves are the benchmark's (bench/RESULTS.md), not asserted.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const bench = fileURLToPath(new URL('../../bench/owner-ceiling.js', import.meta.url));

function run (args: string[]): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [bench, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => { out += d.toString(); });
  child.stderr.on('data', (d: Buffer) => { out += d.toString(); });
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, out })));
}

for (const kind of ['short', 'session']) {
  test(`the owner decides and finishes the generators' ${kind} requests`, { timeout: 60_000 }, async () => {
    const { code, out } = await run(['--seconds', '1', '--inflight', '8', '--kind', kind, '--sessions', '16', '--backends', '2']);
    assert.equal(code, 0, out);
    // No generator died and was started again (the run would then not be one).
    assert.doesNotMatch(out, /data-plane thread (died|threw)/);
    const m = /(\d+) req\/s decided and finished/.exec(out);
    assert.ok(m !== null && Number(m[1]) > 0, out);
    assert.match(out, /queued \d+, refused 0, keys spilled 0/);
    if (kind === 'session') {
      // Their turns carried block keys through the key ring, and routing walked them.
      const w = /prefix walks: (\d+) whole, (\d+) from a session's hint; (\d+) keys recorded/.exec(out);
      assert.ok(w !== null && Number(w[1]) + Number(w[2]) > 0 && Number(w[3]) > 0, out);
    }
  });
}
