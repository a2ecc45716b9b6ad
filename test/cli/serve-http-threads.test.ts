// `ear serve` runs one data-plane thread per core the process may use unless told otherwise (issue 30: a gateway on
// a many-core machine that serves on one thread is the defect the threads remove); a config file or the flag sets
// the number. (`ear epp` keeps one thread, its gRPC door being on the main thread: test/epp/ starts it without the flag.)
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

/** Starts `ear serve ARGS…`, reads the httpThreads its listening line reports, then stops it (SIGTERM, exit 0). */
async function threadsOf (args: string[]): Promise<number> {
  const child = spawn(process.execPath, [ear, 'serve', '--host', '127.0.0.1', '--port', '0', '--backend', 'http://127.0.0.1:9,id=b',
    '--route-threads', '1', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, EAR_LOG_LEVEL: 'info' } });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  try {
    const line = await new Promise<string>((resolve, reject) => {
      const timer = setInterval(() => {
        const m = /^.*"msg":"ear serve listening on [^"]*".*$/m.exec(out);
        if (m !== null) { clearInterval(timer); resolve(m[0]); }
      }, 20);
      void exited.then(() => { clearInterval(timer); reject(new Error(`exited before listening: ${out}`)); });
    });
    child.kill('SIGTERM');
    const [code] = await exited;
    assert.equal(code, 0, out);
    return (JSON.parse(line) as { httpThreads: number }).httpThreads;
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

test('ear serve: a data-plane thread per core the process may use by default; the flag or the file sets it', { timeout: 120_000 }, async () => {
  assert.equal(await threadsOf([]), autoHttpThreads(), 'the default: auto');
  assert.equal(await threadsOf(['--http-threads', '1']), 1, 'the flag');
  const dir = mkdtempSync(join(tmpdir(), 'ear-threads-'));
  try {
    const file = join(dir, 'ear.yaml');
    writeFileSync(file, 'httpThreads: 1\n');
    assert.equal(await threadsOf(['--config', file]), 1, 'the file');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
