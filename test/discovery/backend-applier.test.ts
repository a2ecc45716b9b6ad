// BackendApplier: one reload at a time, lists that arrive meanwhile coalesce (the latest wins), and a failed
// reload is tried again with the latest list.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { BackendApplier } from '../../src/discovery/backend-applier.js';
import type { BackendConfig } from '../../src/config/index.js';

const list = (...ids: string[]): BackendConfig[] => ids.map((id) => ({ id, url: `http://${id}:1`, kvEvents: null, replay: null, kvTopic: '', role: 'both', kvCapacityBlocks: null, maxConcurrent: null, apiKey: null, priority: null }));
const quiet = { warn () {} };

test('a burst of lists while a reload runs costs one more reload, with the latest list', async () => {
  const applied: string[][] = [];
  let running = 0;
  let most = 0;
  const a = new BackendApplier(async (b) => {
    most = Math.max(most, ++running);
    await sleep(30);
    applied.push(b.map((x) => x.id));
    running--;
  }, quiet);
  a.push(list('a'));
  for (let i = 0; i < 300; i++) a.push(list('a', `b${i}`));
  await a.idle();
  assert.deepEqual(applied, [['a'], ['a', 'b299']]);
  assert.equal(most, 1, 'never two reloads at once');
  assert.equal(a.stats.reloads, 2);
});

test('a failed reload is tried again after retryMs with the latest list; a newer list goes first', async () => {
  const applied: string[][] = [];
  let fail = 2;
  const a = new BackendApplier(async (b) => {
    if (fail-- > 0) throw new Error('the backends could not be applied');
    applied.push(b.map((x) => x.id));
  }, quiet, 40);
  a.push(list('a'));
  await a.idle();
  assert.deepEqual(applied, []);
  await sleep(70);
  await a.idle();
  // The first retry failed as well; the second one succeeds.
  await sleep(70);
  await a.idle();
  assert.deepEqual(applied, [['a']]);
  assert.equal(a.stats.failures, 2);
  a.close();
  a.push(list('z'));
  await sleep(60);
  assert.deepEqual(applied, [['a']], 'nothing after close');
});
