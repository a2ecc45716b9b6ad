import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseSimArgs } from '../../src/cli/sim.js';
import { defaultSimOptions, resolveSimOptions } from '../../src/sim/sim-options.js';

const ear = fileURLToPath(new URL('../../src/cli/ear.js', import.meta.url));

test('parseSimArgs: vllm-style flags, --flag=value, underscores, lists, choices, clear errors', () => {
  const o = parseSimArgs(['Qwen/Qwen3-0.6B', '--host', '127.0.0.1', '--port=0', '--served-model-name', 'a', 'b', '--block_size', '32',
    '--enable-prompt-tokens-details', '--kv-events-config', '{"enable_kv_cache_events":true,"topic":"t"}', '--kv-event-format', 'map',
    '--time-scale', '0.5']);
  assert.ok(o !== 'help');
  assert.equal(o.model, 'Qwen/Qwen3-0.6B');
  assert.equal(o.port, 0);
  assert.deepEqual(o.servedModelName, ['a', 'b']);
  assert.equal(o.blockSize, 32);
  assert.equal(o.enablePromptTokensDetails, true);
  assert.equal(o.kvEventsConfig?.publisher, 'zmq');
  assert.equal(o.kvEventsConfig?.endpoint, 'tcp://*:5557');
  assert.equal(o.kvEventsConfig?.topic, 't');
  assert.equal(o.kvEventFormat, 'map');
  assert.equal(o.timeScale, 0.5);
  assert.equal(parseSimArgs(['--port', '1', '--help']), 'help');
  assert.throws(() => parseSimArgs(['--nope']), /unknown option --nope/);
  assert.throws(() => parseSimArgs(['--port', 'x']), /--port must be an integer/);
  assert.throws(() => parseSimArgs(['--port']), /--port needs a value/);
  assert.throws(() => parseSimArgs(['--kv-hash-format', 'hex']), /must be one of int, bytes/);
  assert.throws(() => parseSimArgs(['--kv-events-config', '{"bogus":1}']), /unknown key "bogus"/);
  assert.throws(() => parseSimArgs(['--kv-events-config', '{']), /not valid JSON/);
  assert.throws(() => parseSimArgs(['m1', 'm2']), /unexpected argument "m2"/);
  const lora = parseSimArgs(['--enable-lora', '--lora-modules', 'a=/p/a', '{"name":"b","path":"/p/b","base_model_name":"m"}']);
  assert.ok(lora !== 'help');
  assert.deepEqual(lora.loraModules, [{ name: 'a', path: '/p/a', baseModelName: null }, { name: 'b', path: '/p/b', baseModelName: 'm' }]);
  assert.equal('enableLora' in lora, false);
  assert.throws(() => parseSimArgs(['--lora-modules', 'nopath']), /expected name=path/);
  // vLLM's scheduler flags, its names and defaults (fcfs, threshold 0 = no cap).
  const sched = parseSimArgs(['--scheduling-policy', 'priority', '--long_prefill_token_threshold=256']);
  assert.ok(sched !== 'help');
  assert.equal(sched.schedulingPolicy, 'priority');
  assert.equal(sched.longPrefillTokenThreshold, 256);
  assert.throws(() => parseSimArgs(['--scheduling-policy', 'sjf']), /--scheduling-policy must be one of fcfs, priority, got "sjf"/);
  assert.throws(() => parseSimArgs(['--long-prefill-token-threshold', '1.5']), /must be an integer/);
  assert.equal(defaultSimOptions.schedulingPolicy, 'fcfs');
  assert.equal(defaultSimOptions.longPrefillTokenThreshold, 0);
  assert.throws(() => resolveSimOptions({ longPrefillTokenThreshold: -1 }), /option longPrefillTokenThreshold: must be an integer >= 0, got -1/);
  assert.throws(() => resolveSimOptions({ schedulingPolicy: 'lifo' as 'fcfs' }), /option schedulingPolicy: must be one of fcfs, priority/);
});

test('ear sim: --help, a bad flag, an unknown command', () => {
  const help = spawnSync(process.execPath, [ear, 'sim', '--help'], { encoding: 'utf8' });
  assert.equal(help.status, 0);
  assert.match(help.stdout, /--max-model-len/);
  assert.match(help.stdout, /--time-scale/);
  const bad = spawnSync(process.execPath, [ear, 'sim', '--max-model-len', 'big'], { encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--max-model-len must be an integer, got "big"/);
  const badValue = spawnSync(process.execPath, [ear, 'sim', '--port', '0', '--profile', 'no-such-gpu'], { encoding: 'utf8' });
  assert.equal(badValue.status, 1);
  assert.match(badValue.stderr, /unknown engine profile/);
  const unknown = spawnSync(process.execPath, [ear, 'simulate'], { encoding: 'utf8' });
  assert.equal(unknown.status, 2);
  assert.match(unknown.stderr, /unknown command "simulate"/);
});

test('ear sim starts, logs its address, answers, and exits cleanly on SIGTERM', async () => {
  const child = spawn(process.execPath, [ear, 'sim', '--host', '127.0.0.1', '--port', '0', '--time-scale', '0', '--served-model-name', 'cli-model'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(out);
        if (m !== null) resolve(m[1]);
      });
      child.once('exit', (code) => reject(new Error(`ear sim exited (${code}) before listening: ${out}`)));
    });
    const models = await (await fetch(`${url}/v1/models`)).json() as { data: Array<{ id: string }> };
    assert.equal(models.data[0].id, 'cli-model');
    const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'cli-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }) });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens <= 2, true);
  } finally {
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
  }
});
