// Two `ear sim` processes sharing one offload store, as a user runs them: A hosts it (--kv-offload-serve), B points
// at it (--kv-offload-store). A session computed on one engine and re-routed to the other is served from the store.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { parseSimArgs } from '../../src/cli/sim.js';
import { post, text } from './http-helpers.js';
import { until } from '../fixtures/wait.js';

const ear = fileURLToPath(new URL('../../src/cli/ear.js', import.meta.url));

interface Proc { child: ChildProcess; url: string }

async function start (args: string[]): Promise<Proc> {
  const child = spawn(process.execPath, [ear, 'sim', '--host', '127.0.0.1', '--port', '0', '--time-scale', '0', '--stop-probability', '0',
    '--enable-prompt-tokens-details', '--served-model-name', 'm', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, EAR_LOG_LEVEL: 'info' } });
  let out = '';
  child.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(out);
      if (m !== null) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`ear sim exited (${code}) before listening: ${out}`)));
  });
  return { child, url };
}

async function stop (p: Proc | undefined): Promise<number | null> {
  if (p === undefined || p.child.exitCode !== null || p.child.signalCode !== null) return null;
  const exited = once(p.child, 'exit');
  p.child.kill('SIGTERM');
  return (await exited as [number | null])[0];
}

const cached = (r: { json: any }): number => r.json.usage.prompt_tokens_details?.cached_tokens ?? 0;
const stats = async (p: Proc): Promise<any> => (await fetch(`${p.url}/ear/v1/kv/store/stats`)).json();

test('parseSimArgs: the offload flags, and clear errors for bad values', () => {
  const host = parseSimArgs(['--kv-offload-serve', '--kv-offload-capacity', '1000']);
  assert.ok(host !== 'help');
  assert.equal(host.kvOffloadServe, true);
  assert.equal(host.kvOffloadCapacity, 1000);
  const user = parseSimArgs(['--kv-offload-store', 'http://127.0.0.1:9000/']);
  assert.ok(user !== 'help');
  assert.equal(user.kvOffloadStore, 'http://127.0.0.1:9000');
  assert.throws(() => parseSimArgs(['--kv-offload-store', 'localhost:9000']), /--kv-offload-store: offload store URL must be http:\/\/host:port/);
  assert.throws(() => parseSimArgs(['--kv-offload-store']), /--kv-offload-store needs a value/);
  assert.throws(() => parseSimArgs(['--kv-offload-capacity', 'lots']), /--kv-offload-capacity must be an integer/);
});

test('ear sim: --help documents the offload flags; conflicting or bad values exit with a message', () => {
  const help = spawnSync(process.execPath, [ear, 'sim', '--help'], { encoding: 'utf8' });
  assert.equal(help.status, 0);
  for (const f of ['--kv-offload-serve', '--kv-offload-store', '--kv-offload-capacity']) assert.match(help.stdout, new RegExp(f));
  const both = spawnSync(process.execPath, [ear, 'sim', '--port', '0', '--kv-offload-serve', '--kv-offload-store', 'http://127.0.0.1:1'], { encoding: 'utf8' });
  assert.equal(both.status, 1);
  assert.match(both.stderr, /cannot be combined with kvOffloadServe/);
  const small = spawnSync(process.execPath, [ear, 'sim', '--port', '0', '--kv-offload-serve', '--kv-offload-capacity', '0'], { encoding: 'utf8' });
  assert.equal(small.status, 1);
  assert.match(small.stderr, /kvOffloadCapacity: must be an integer of blocks/);
});

test('two ear sim processes share one store: a prompt computed on either is served from it on the other', async () => {
  let a: Proc | undefined;
  let b: Proc | undefined;
  try {
    a = await start(['--kv-offload-serve']);
    b = await start(['--kv-offload-store', a.url]);

    // A computes a long prompt; B, which never saw it, loads it from A's store.
    const prompt = text(2000, 21);
    const onA = await post(`${a.url}/v1/completions`, { model: 'm', prompt, max_tokens: 4 });
    assert.equal(onA.status, 200);
    assert.equal(cached(onA), 0);
    const onB = await post(`${b.url}/v1/completions`, { model: 'm', prompt, max_tokens: 4 });
    assert.equal(onB.status, 200);
    assert.equal(onB.json.usage.prompt_tokens, 2000);
    assert.ok(cached(onB) >= 1984, `B reported ${cached(onB)} cached tokens of 2000`);
    assert.equal((await stats(b)).engine.loaded_tokens, cached(onB));

    // The other way: B computes, its saves reach A's store after the step, then A loads them.
    const messages = [{ role: 'user', content: text(1500, 22) }];
    const sizeBefore = (await stats(a)).store.size as number;
    const first = await post(`${b.url}/v1/chat/completions`, { model: 'm', messages, max_tokens: 4 });
    assert.equal(first.status, 200);
    const promptTokens = first.json.usage.prompt_tokens as number;
    const need = Math.floor((promptTokens - 1) / 16);
    await until(async () => (await stats(a!)).store.size >= sizeBefore + need, `A to store the prompt's ${need} blocks`);
    const again = await post(`${a.url}/v1/chat/completions`, { model: 'm', messages, max_tokens: 4 });
    assert.ok(cached(again) >= need * 16, `A reported ${cached(again)} cached tokens of ${promptTokens}`);
    const s = await stats(a);
    assert.equal(s.role, 'host');
    assert.ok(s.engine.loaded_tokens >= need * 16);
    assert.ok(s.store.size >= sizeBefore + need);
    assert.equal((await stats(b)).client.saveErrors, 0);
  } finally {
    const codes = await Promise.all([stop(b), stop(a)]);
    assert.deepEqual(codes, [0, 0]);
  }
});
