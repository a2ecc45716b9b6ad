// One soak request through the gateway, streamed or not, and what became of it: served, or failed with a cause a
// reader can act on ("503 EAR_ERR_OVERLOADED", "stream cut", "connection ECONNRESET"), never a bare "error".
import { Agent, request } from 'undici';

export type Outcome = { ok: true; cached: number; output: number } | { ok: false; cause: string };

export interface SoakRequest {
  sessionId: string;
  /** Prompt token ids (the workload's; the engines and the gateway hash ids, no tokenizer runs). */
  tokens: Uint32Array;
  maxTokens: number;
  stream: boolean;
}

/** Generous client timeouts: a request that waits this long is reported as a failure, not as slow. */
export function soakAgent (): Agent {
  return new Agent({ connections: 256, headersTimeout: 300_000, bodyTimeout: 300_000 });
}

// One connection per request (`connection: close`). With keep-alive, a client can send on a connection in the
// instant the gateway closes it as idle (uWS: after 10 s): the request never reaches the gateway and fails with
// "other side closed". On a machine whose load average reaches 25 (2 cores, shared), event loops lag by seconds
// and 13 requests of one minute of an early run failed so, most likely by that race. It is the client's keep-alive race, not the
// gateway losing a request; the soak measures the gateway, so it does not play it.

/** The `code` of an OpenAI-style error body, or the body's start when it is not one. */
function errorCode (body: string): string {
  try {
    const code = (JSON.parse(body) as { error?: { code?: unknown } }).error?.code;
    if (code !== undefined && code !== null) return String(code);
  } catch {}
  return JSON.stringify(body.slice(0, 60));
}

export async function send (agent: Agent, gateway: string, model: string, r: SoakRequest): Promise<Outcome> {
  // Written by hand: JSON.stringify turns a Uint32Array into an object.
  const streamPart = r.stream ? ',"stream":true,"stream_options":{"include_usage":true}' : '';
  const body = `{"model":"${model}","prompt":[${r.tokens.join(',')}],"max_tokens":${r.maxTokens},"ignore_eos":true${streamPart}}`;
  let res;
  try {
    res = await request(`${gateway}/v1/completions`, { method: 'POST', dispatcher: agent, headers: { 'content-type': 'application/json', 'x-session-id': r.sessionId }, body, reset: true });
  } catch (err) {
    return { ok: false, cause: `connection ${(err as { code?: string }).code ?? (err as Error).message}` };
  }
  try {
    if (res.statusCode !== 200) return { ok: false, cause: `${res.statusCode} ${errorCode(await res.body.text())}` };
    if (!r.stream) {
      const doc = await res.body.json() as { usage?: { completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null } };
      const output = doc.usage?.completion_tokens ?? 0;
      if (output !== r.maxTokens) return { ok: false, cause: `short answer (${output} of ${r.maxTokens} tokens)` };
      return { ok: true, cached: doc.usage?.prompt_tokens_details?.cached_tokens ?? 0, output };
    }
    return await readStream(res.body, r.maxTokens);
  } catch (err) {
    return { ok: false, cause: `body ${(err as { code?: string }).code ?? (err as Error).message}` };
  }
}

/** Reads an SSE stream to its end: served only with its usage chunk, every token, and `[DONE]`. */
async function readStream (body: AsyncIterable<Buffer>, maxTokens: number): Promise<Outcome> {
  let carry = '';
  let done = false;
  let cached = 0;
  let output = -1;
  for await (const chunk of body) {
    carry += chunk.toString();
    let i;
    while ((i = carry.indexOf('\n\n')) >= 0) {
      const ev = carry.slice(0, i);
      carry = carry.slice(i + 2);
      if (ev === 'data: [DONE]') { done = true; continue; }
      if (!ev.startsWith('data: ')) continue;
      const doc = JSON.parse(ev.slice(6)) as { error?: { code?: unknown }; usage?: { completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null } };
      if (doc.error) return { ok: false, cause: `stream error ${String(doc.error.code)}` };
      if (doc.usage) {
        cached = doc.usage.prompt_tokens_details?.cached_tokens ?? 0;
        output = doc.usage.completion_tokens ?? 0;
      }
    }
  }
  if (!done) return { ok: false, cause: 'stream cut (no [DONE])' };
  if (output !== maxTokens) return { ok: false, cause: `short stream (${output} of ${maxTokens} tokens)` };
  return { ok: true, cached, output };
}
