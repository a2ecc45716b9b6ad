// The gateway benchmark's upstream: an OpenAI-compatible server that answers every completion at once with a
// canned body, so the proxy in front of it, not the engine, is what gets measured. It reads the whole request
// body (a proxy must deliver it) and ignores it. Runs as its own process (not on the proxy's event loop):
// `node dist/bench/upstream.js [port]` prints {"port":N} on stdout once listening; SIGTERM stops it.
import uWS from 'uWebSockets.js';
import type { HttpResponse } from 'uWebSockets.js';
import { pathToFileURL } from 'node:url';

export const BENCH_MODEL = 'bench-model';

const CREATED = 1_700_000_000;

export const CANNED_COMPLETION = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: CREATED,
  model: BENCH_MODEL,
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello! How can I help you today?' }, logprobs: null, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 }
});

/** An Anthropic message, as vLLM's /v1/messages answers it. */
export const CANNED_MESSAGE = JSON.stringify({
  id: 'chatcmpl-bench', type: 'message', role: 'assistant', content: [{ type: 'text', text: 'Hello! How can I help you today?' }],
  model: BENCH_MODEL, stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 12, output_tokens: 9 }
});

const WORDS = 'Sure , here is a short answer : the gateway forwards each token as soon as the engine sends it .'.split(' ');

function chunk (delta: Record<string, unknown>, finish: string | null, usage?: Record<string, number>): string {
  // vLLM leaves unset fields out: `usage` appears only on the last chunk (stream_options.include_usage).
  const doc = { id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: CREATED, model: BENCH_MODEL, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage };
  return `data: ${JSON.stringify(doc)}\n\n`;
}

/** SSE events as vLLM frames them: the role, one event per word, the finish with usage, then [DONE]. */
export const CANNED_STREAM: readonly string[] = [
  chunk({ role: 'assistant', content: '' }, null),
  ...WORDS.map((w, i) => chunk({ content: i === 0 ? w : ` ${w}` }, null)),
  chunk({}, 'stop', { prompt_tokens: 12, completion_tokens: WORDS.length, total_tokens: 12 + WORDS.length }),
  'data: [DONE]\n\n'
];

const MODELS = JSON.stringify({ object: 'list', data: [{ id: BENCH_MODEL, object: 'model', created: CREATED, owned_by: 'bench' }] });

function completion (res: HttpResponse, _req: unknown, canned = CANNED_COMPLETION): void {
  let aborted = false;
  res.onAborted(() => { aborted = true; });
  let head = '';
  res.onData((ab, isLast) => {
    // `"stream":true` is near the start of the bench's bodies; looking at the first chunk avoids parsing 130 KB.
    if (head.length < 256) head += Buffer.from(ab.slice(0, 256)).toString('latin1');
    if (!isLast || aborted) return;
    const stream = /"stream"\s*:\s*true/.test(head);
    res.cork(() => {
      if (!stream) {
        res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(canned);
        return;
      }
      // One HTTP chunk per event (chunked encoding), all at once: the proxy sees every event but never waits.
      res.writeStatus('200 OK').writeHeader('content-type', 'text/event-stream; charset=utf-8');
      for (const e of CANNED_STREAM) res.write(e);
      res.end();
    });
  });
}

function main (): void {
  const port = Number(process.argv[2] ?? 0);
  const app = uWS.App()
    .get('/health', (res) => { res.cork(() => res.writeStatus('200 OK').end()); })
    .get('/v1/models', (res) => { res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(MODELS)); })
    .post('/v1/chat/completions', completion)
    .post('/v1/completions', completion)
    .post('/v1/messages', (res, req) => completion(res, req, CANNED_MESSAGE))
    .any('/*', (res) => { res.cork(() => res.writeStatus('404 Not Found').end()); });
  app.listen('127.0.0.1', port, (token) => {
    if (!token) {
      console.error(`upstream: cannot listen on 127.0.0.1:${port}`);
      process.exit(1);
    }
    process.stdout.write(`${JSON.stringify({ port: uWS.us_socket_local_port(token) })}\n`);
    const stop = (): void => {
      uWS.us_listen_socket_close(token);
      process.exit(0);
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) main();
