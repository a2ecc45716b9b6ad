// `ear serve` runs one data-plane thread per core the process may use unless told otherwise (issue 30: a gateway on
// a many-core machine that serves on one thread is the defect the threads remove); a config file or the flag sets
// the number; `ear serve --demo` keeps one, and `ear epp` takes `auto` as one (its gRPC door runs on the main thread).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { autoHttpThreads } from '../../src/config/server.js';

const ear = fileURLToPath(new URL('../../src/cli/ear.js', import.meta.url));

/** Starts `ear serve ARGS…` (or another command), reads its listening line, then stops it (SIGTERM, exit 0). */
async function listeningLine (args: string[], command = 'serve'): Promise<Record<string, unknown>> {
  const child = spawn(process.execPath, [ear, command, '--host', '127.0.0.1', '--port', '0', '--backend', 'http://127.0.0.1:9,id=b',
    '--route-threads', '1', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, EAR_LOG_LEVEL: 'info' } });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  try {
    const line = await new Promise<string>((resolve, reject) => {
      const timer = setInterval(() => {
        const m = new RegExp(`^.*"msg":"ear ${command} listening[^"]*".*$`, 'm').exec(out);
        if (m !== null) { clearInterval(timer); resolve(m[0]); }
      }, 20);
      void exited.then(() => { clearInterval(timer); reject(new Error(`exited before listening: ${out}`)); });
    });
    child.kill('SIGTERM');
    const [code] = await exited;
    assert.equal(code, 0, out);
    return JSON.parse(line) as Record<string, unknown>;
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

const threadsOf = async (args: string[]): Promise<number> => (await listeningLine(args)).httpThreads as number;

test('ear serve: a data-plane thread per core the process may use by default; the flag or the file sets it', { timeout: 120_000 }, async () => {
  // (On one core auto is 1, the old default too: CI's two cores tell them apart.)
  assert.equal(await threadsOf([]), autoHttpThreads(), 'the default: auto');
  assert.equal(await threadsOf(['--demo', '1']), 1, 'the demo: one thread, its engines on the main thread beside it');
  assert.equal(await threadsOf(['--http-threads', '1']), 1, 'the flag');
  const dir = mkdtempSync(join(tmpdir(), 'ear-threads-'));
  try {
    const file = join(dir, 'ear.yaml');
    writeFileSync(file, 'httpThreads: 1\n');
    assert.equal(await threadsOf(['--config', file]), 1, 'the file');
    // A file `ear serve` and `ear epp` share may say auto: the endpoint picker then keeps its one thread.
    writeFileSync(file, 'httpThreads: auto\n');
    const epp = await listeningLine(['--config', file, '--grpc-port', '0', '--grpc-health-port', '0'], 'epp');
    assert.equal(typeof epp.grpcPort, 'number');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
