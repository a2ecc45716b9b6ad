// `ear serve` exports the process's own series on /metrics (prom-client's default metrics): the soak reads the
// gateway's RSS and heap there, and an operator's dashboards expect them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { simFleet } from '../fixtures/processes.js';

test('ear serve /metrics has the process RSS, heap and event-loop series', { timeout: 60_000 }, async () => {
  const fleet = await simFleet([], () => [[]]);
  try {
    const text = await (await fetch(`${fleet.url}/metrics`)).text();
    for (const name of ['process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_seconds']) {
      const line = text.split('\n').find((l) => l.startsWith(`${name} `));
      assert.ok(line !== undefined, `${name} missing from /metrics`);
      // Lag may read 0 on an idle loop; memory never does.
      const v = Number(line.slice(name.length + 1));
      assert.ok(name.includes('lag') ? v >= 0 : v > 0, line);
    }
    // Registered once: a second scrape still answers (prom-client refuses a metric name registered twice).
    assert.equal((await fetch(`${fleet.url}/metrics`)).status, 200);
  } finally {
    await fleet.close();
  }
});
