import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { Progress } from '../../../src/eval/report/progress.js';

function sink (): { stream: Writable; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({ write (chunk, _enc, cb) { lines.push(String(chunk)); cb(); } });
  return { stream, lines };
}

test('progress prints at most once per interval, with the share done and an estimate of the time left', () => {
  const { stream, lines } = sink();
  let now = 0;
  const p = new Progress({ label: 'des ear', stream, intervalMs: 1000, now: () => now });
  p.update(0, 600);
  now = 500; p.update(100, 600); // throttled
  now = 2000; p.update(150, 600, 'req 1234');
  now = 2500; p.update(300, 600); // throttled
  now = 4000; p.finish('600 s virtual');
  assert.equal(p.printed, 3);
  assert.equal(lines[0], '[des ear] 0.0% 0/600 0.0s elapsed\n');
  assert.equal(lines[1], '[des ear] 25.0% 150/600 2.0s elapsed, ~6s left req 1234\n');
  assert.equal(lines[2], '[des ear] done in 4.0s 600 s virtual\n');
});
