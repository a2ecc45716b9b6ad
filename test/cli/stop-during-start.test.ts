// A SIGTERM that reaches `ear serve` or `ear epp` while it is still starting (here: waiting for its session store,
// which accepts the connection and never answers) is not the default kill: start-up ends, then the gateway drains
// and exits 0. Doors and data-plane threads serve as soon as each listens, before start-up ends, so a kill there
// would cut their requests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { withTestThreadsArgs } from '../fixtures/http-threads-env.js';

const ear = fileURLToPath(new URL('../../src/cli/ear.js', import.meta.url));

const COMMANDS: Array<[string, string[]]> = [['serve', []], ['epp', ['--grpc-port', '0', '--grpc-health-port', '0']]];

for (const [command, extra] of COMMANDS) test(`SIGTERM during start-up: ear ${command} finishes starting, drains and exits 0`, { timeout: 60_000 }, async () => {
  const held: Socket[] = [];
  let connected!: () => void;
  const storeReached = new Promise<void>((resolve) => { connected = resolve; });
  // A "redis" that takes the connection and says nothing: start-up waits for it (at most 1 s, then serves without).
  const silent = createServer((s) => { held.push(s); connected(); });
  silent.listen(0, '127.0.0.1');
  await once(silent, 'listening');
  const port = (silent.address() as { port: number }).port;
  // ear serve: 1 thread, or EAR_TEST_HTTP_THREADS's (the threads pass), whose threads each wait for the store too.
  const args = withTestThreadsArgs([command, '--host', '127.0.0.1', '--port', '0', '--backend', 'http://127.0.0.1:9,id=b',
    '--session-store', `redis://127.0.0.1:${port}`, ...extra]);
  const child = spawn(process.execPath, [ear, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, EAR_LOG_LEVEL: 'info' } });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  try {
    await Promise.race([storeReached, exited.then(() => { throw new Error(`exited before it reached its store: ${out}`); })]);
    assert.doesNotMatch(out, /listening/, 'still starting when the signal comes');
    child.kill('SIGTERM');
    const [code, signal] = await exited;
    assert.equal(signal, null, `killed by ${signal}: ${out}`);
    assert.equal(code, 0, out);
    assert.match(out, /stop asked for while starting[\s\S]*listening[\s\S]*"msg":"draining"[\s\S]*"msg":"drained"/);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    for (const s of held) s.destroy();
    silent.close();
  }
});
