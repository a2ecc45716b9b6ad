// The engine priority as the forwarded body carries it: a client's own field stripped where the body is read
// (request-body.ts), EAR's appended without a re-parse (priority-field.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseRequestBody } from '../../src/features/request-body.js';
import { withPriorityField } from '../../src/features/priority-field.js';

const buf = (o: unknown) => Buffer.from(typeof o === 'string' ? o : JSON.stringify(o));

test('a client\'s priority is stripped from every API\'s forwarded body and kept aside', () => {
  const chat = parseRequestBody('chat', buf({ model: 'm', messages: [{ role: 'user', content: 'x' }], priority: -9 }));
  assert.equal('priority' in JSON.parse(chat.forward.toString()), false);
  assert.equal(chat.clientPriority, -9);
  const responses = parseRequestBody('responses', buf({ model: 'm', input: 'x', priority: 3 }));
  assert.equal('priority' in JSON.parse(responses.forward.toString()), false);
  assert.equal(responses.clientPriority, 3);
  const messages = parseRequestBody('messages', buf({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'x' }], priority: 1 }));
  assert.equal('priority' in JSON.parse(messages.forward.toString()), false);
  assert.equal(parseRequestBody('completions', buf({ model: 'm', prompt: 'x', priority: 'first' })).clientPriority, 'invalid');
  assert.equal(parseRequestBody('completions', buf({ model: 'm', prompt: 'x', priority: 2 ** 60 })).clientPriority, 'invalid');
  const none = buf({ model: 'm', prompt: 'x' });
  const p = parseRequestBody('completions', none);
  assert.equal(p.forward, none, 'a body without the field is forwarded as the client\'s bytes');
  assert.equal(p.clientPriority, null);
});

test('withPriorityField appends the member exactly; null leaves the same buffer', () => {
  const b = Buffer.from(' {"model":"m" ,"x":[1,{"y":"}"}]}\n ');
  assert.equal(withPriorityField(b, null), b);
  const out = withPriorityField(b, -65);
  assert.deepEqual(JSON.parse(out.toString()), { model: 'm', x: [1, { y: '}' }], priority: -65 });
  assert.equal(out.toString(), ' {"model":"m" ,"x":[1,{"y":"}"}],"priority":-65}');
  assert.deepEqual(JSON.parse(withPriorityField(Buffer.from('{ }'), 0).toString()), { priority: 0 });
  assert.throws(() => withPriorityField(Buffer.from('[1]'), 1), /JSON object/);
  assert.throws(() => withPriorityField(Buffer.from('{}'), 1.5), /safe integer/);
});

test('withPriorityField on any JSON object equals setting the field', () => {
  fc.assert(fc.property(fc.dictionary(fc.string().filter((k) => k !== 'priority' && k !== '__proto__'), fc.jsonValue()), fc.integer({ min: -1000, max: 1000 }), fc.boolean(), (o, v, pretty) => {
    const raw = Buffer.from(JSON.stringify(o, null, pretty ? 2 : undefined));
    assert.deepEqual(JSON.parse(withPriorityField(raw, v).toString()), { ...JSON.parse(raw.toString()), priority: v });
  }), { numRuns: 300 });
});
