// `npm run flamegraph` on a tiny load: the gateway benchmark's short case for a few seconds. The script must
// leave a flamegraph page per EAR thread (main, the route pool's, the kv-events thread), each backed by a CPU
// profile with samples and the viewer it opens.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const script = fileURLToPath(new URL('../../../scripts/flamegraph.js', import.meta.url));

test('flamegraph gateway-short writes a non-empty flamegraph for each thread', { timeout: 240_000 }, () => {
  const out = mkdtempSync(join(tmpdir(), 'ear-flame-'));
  try {
    const r = spawnSync(process.execPath, [script, 'gateway-short', '--seconds', '2', '--out', out], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr.slice(-4000));
    assert.ok(r.stdout.trim().endsWith(out), r.stdout);
    const pages = readdirSync(out).filter((f) => f.endsWith('.html')).sort();
    assert.ok(pages.includes('gateway-short-main.html'), pages.join(', '));
    assert.ok(pages.includes('gateway-short-kv-events.html'), pages.join(', '));
    assert.ok(pages.some((p) => p.startsWith('gateway-short-route-pool-')), pages.join(', '));
    assert.ok(existsSync(join(out, 'speedscope', 'index.html')));
    for (const page of pages) {
      const name = page.slice(0, -'.html'.length);
      assert.match(readFileSync(join(out, page), 'utf8'), /speedscope\/index\.html/);
      // The data script hands the viewer a CPU profile: decode it and count its samples.
      const data = /loadFileFromBase64\("[^"]+", "([^"]+)"\)/.exec(readFileSync(join(out, `${name}.js`), 'utf8'));
      assert.ok(data !== null, name);
      const profile = JSON.parse(Buffer.from(data[1], 'base64').toString('utf8')) as { nodes: unknown[]; samples: number[] };
      assert.ok(profile.nodes.length > 1 && profile.samples.length > 0, name);
    }
    // The main thread's profile shows the gateway's own code, not only idle time.
    assert.match(readFileSync(join(out, 'gateway-short-main.top.txt'), 'utf8'), /server\.js|uws-io\.js|router\.js/);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
