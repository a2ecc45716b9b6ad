// A streamed turn whose engine is SIGKILLed mid-stream goes on on the other engine (docs/resume.md), under each
// API, through the official SDKs: the stream parses and completes, with one id, indexes that continue, every
// token once (the sims run each turn to max_tokens, one token a chunk) and the usage of the whole turn.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { metric, simFleet, stop, text, type SimFleet } from '../fixtures/processes.js';

const MAX = 300;
/** Content chunks the client reads before its engine is killed. */
const KILL_AT = 12;

let fleet: SimFleet;
before(async () => {
  // Health checks a minute apart: the gateway learns of the dead engine from the request that hits it.
  fleet = await simFleet(['metricsIntervalMs: 0', 'healthIntervalMs: 60000', 'policy: sticky'],
    () => [0, 1].map(() => ['--stop-probability', '0']));
});
after(() => fleet.close());

const simIndex = (backend: string | null): number => Number((backend ?? '').slice('sim-'.length));

/** Kills the engine serving a stream (once), to be brought back after the test. */
function killer (): { kill: (backend: string | null) => Promise<void>; revive: () => Promise<void> } {
  let killed = -1;
  return {
    async kill (backend) {
      if (killed >= 0) return;
      killed = simIndex(backend);
      await stop(fleet.sims[killed], 'SIGKILL');
    },
    async revive () {
      if (killed >= 0) await fleet.restartSim(killed);
    }
  };
}

const prompt = (seed: string): string => text(seed, 400);

describe('an engine SIGKILLed mid-stream: the stream goes on on another engine', () => {
  test('chat completions (openai SDK)', async () => {
    const k = killer();
    const before = await metric(fleet.url, 'ear_stream_resumes_total', '{outcome="resumed"}');
    try {
      const client = new OpenAI({ baseURL: `${fleet.url}/v1`, apiKey: 'x', maxRetries: 0 });
      const { data: stream, response } = await client.chat.completions.create({
        model: 'm', messages: [{ role: 'user', content: prompt('chat') }], max_tokens: MAX, stream: true, stream_options: { include_usage: true }
      }).withResponse();
      const ids = new Set<string>();
      const created = new Set<number>();
      let chunks = 0;
      let content = '';
      let roles = 0;
      let finish: string | null = null;
      let usage: OpenAI.CompletionUsage | null = null;
      for await (const c of stream) {
        ids.add(c.id);
        created.add(c.created);
        if (c.usage) usage = c.usage;
        const choice = c.choices[0];
        if (choice === undefined) continue;
        assert.equal(choice.index, 0);
        if (choice.delta.role !== undefined) roles++;
        if (choice.finish_reason) finish = choice.finish_reason;
        if (choice.delta.content) {
          chunks++;
          content += choice.delta.content;
          if (chunks === KILL_AT) await k.kill(response.headers.get('x-ear-backend'));
        }
      }
      assert.equal(ids.size, 1, 'one id');
      assert.equal(created.size, 1, 'one created');
      assert.equal(roles, 1, 'one role chunk');
      assert.equal(finish, 'length');
      assert.equal(chunks, MAX, 'every token once');
      assert.ok(usage !== null);
      assert.equal(usage.completion_tokens, MAX);
      assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
      assert.ok(content.length > 0);
      assert.equal(await metric(fleet.url, 'ear_stream_resumes_total', '{outcome="resumed"}'), before + 1);
    } finally {
      await k.revive();
    }
  });

  test('completions (openai SDK)', async () => {
    const k = killer();
    try {
      const client = new OpenAI({ baseURL: `${fleet.url}/v1`, apiKey: 'x', maxRetries: 0 });
      const { data: stream, response } = await client.completions.create({
        model: 'm', prompt: prompt('completions'), max_tokens: MAX, stream: true, stream_options: { include_usage: true }
      }).withResponse();
      const ids = new Set<string>();
      let chunks = 0;
      let usage: OpenAI.CompletionUsage | null = null;
      for await (const c of stream) {
        ids.add(c.id);
        if (c.usage) usage = c.usage;
        if (c.choices[0]?.text) {
          chunks++;
          if (chunks === KILL_AT) await k.kill(response.headers.get('x-ear-backend'));
        }
      }
      assert.equal(ids.size, 1);
      assert.equal(chunks, MAX);
      assert.equal(usage?.completion_tokens, MAX);
    } finally {
      await k.revive();
    }
  });

  test('Messages (Anthropic SDK)', async () => {
    const k = killer();
    try {
      const client = new Anthropic({ baseURL: fleet.url, apiKey: 'x', maxRetries: 0 });
      const stream = client.messages.stream({ model: 'm', messages: [{ role: 'user', content: prompt('messages') }], max_tokens: MAX });
      const { response } = await stream.withResponse();
      const types: string[] = [];
      const indexes = new Set<number>();
      let deltas = 0;
      for await (const e of stream) {
        types.push(e.type);
        if (e.type === 'content_block_start' || e.type === 'content_block_stop' || e.type === 'content_block_delta') indexes.add(e.index);
        if (e.type === 'content_block_delta') {
          deltas++;
          if (deltas === KILL_AT) await k.kill(response.headers.get('x-ear-backend'));
        }
      }
      const final = await stream.finalMessage();
      assert.equal(types.filter((t) => t === 'message_start').length, 1);
      assert.equal(types.filter((t) => t === 'message_stop').length, 1);
      assert.equal(types.filter((t) => t === 'content_block_start').length, 1, 'the open text block went on');
      assert.deepEqual([...indexes], [0]);
      assert.equal(deltas, MAX);
      assert.equal(final.usage.output_tokens, MAX);
      assert.ok(final.usage.input_tokens > 0);
      assert.equal(final.stop_reason, 'max_tokens');
      assert.equal(final.content.length, 1);
    } finally {
      await k.revive();
    }
  });

  test('Responses (openai SDK)', async () => {
    const k = killer();
    try {
      const client = new OpenAI({ baseURL: `${fleet.url}/v1`, apiKey: 'x', maxRetries: 0 });
      const { data: stream, response } = await client.responses.create({ model: 'm', input: prompt('responses'), max_output_tokens: MAX, stream: true }).withResponse();
      const seqs: number[] = [];
      const items = new Set<string>();
      let deltas = 0;
      let text = '';
      let done: string | null = null;
      let created: string | null = null;
      let completed: OpenAI.Responses.Response | null = null;
      for await (const e of stream) {
        seqs.push(e.sequence_number);
        if (e.type === 'response.created') created = e.response.id;
        if (e.type === 'response.output_item.added') items.add(e.item.id!);
        if (e.type === 'response.output_text.done') done = e.text;
        if (e.type === 'response.completed') completed = e.response;
        if (e.type === 'response.output_text.delta') {
          assert.equal(e.output_index, 0);
          text += e.delta;
          deltas++;
          if (deltas === KILL_AT) await k.kill(response.headers.get('x-ear-backend'));
        }
      }
      assert.deepEqual(seqs, seqs.map((_, i) => i), 'sequence numbers follow on');
      assert.equal(items.size, 1, 'one message item');
      assert.equal(deltas, MAX);
      assert.equal(done, text, 'the done event has the whole text');
      assert.ok(completed !== null);
      assert.equal(completed.id, created);
      assert.equal(completed.usage?.output_tokens, MAX);
      const out = completed.output.flatMap((o) => o.type === 'message' ? o.content.map((c) => c.type === 'output_text' ? c.text : '') : []);
      assert.deepEqual(out, [text], 'the completed response holds the whole text once');
    } finally {
      await k.revive();
    }
  });
});
