// POST /v1/chat/completions and /v1/completions: validate, render and tokenize the prompt(s), hand one engine
// request per (prompt, sample) to the host, and answer as vLLM does, streamed (SSE) or whole. The other APIs
// (Anthropic Messages, OpenAI Responses) convert their body to a chat GenerationRequest and run it here too,
// with their own OutputFormat.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BlockDigest } from './block-hash.js';
import type { FinishReason, KvImport, RequestMetrics, RequestOutput, SimRequest } from './engine-types.js';
import { EngineFullError, contextLengthError } from './engine.js';
import { EarError } from '../errors/errors.js';
import { HttpError, badRequest } from './http-errors.js';
import { classifyKvTransferParams, exportParams, pullBlocks } from './kv-transfer.js';
import type { ImportParams } from './kv-transfer.js';
import type { GenerationRequest } from './openai-request.js';
import { parseGenerationRequest } from './openai-request.js';
import { IncrementalDetokenizer } from './incremental-detokenizer.js';
import { OpenAiFormat } from './openai-response.js';
import type { ChoiceResult, StopReason, UsageCounts } from './openai-response.js';
import type { OutputFormat } from './output-format.js';
import type { SimContext } from './sim-context.js';

const KV_PULL_TIMEOUT_MS = 10_000;

export interface Prompt {
  ids: number[];
  /** For echo. */
  text: string;
}

interface Choice {
  index: number;
  engineId: string;
  prompt: Prompt;
  promptIdx: number;
  maxTokens: number;
  genIds: number[];
  /** The text so far; the stop token that ended generation is not shown. */
  detok: IncrementalDetokenizer;
  text: string;
  /** Length of `text` already streamed. */
  sent: number;
  echoed: boolean;
  finish: FinishReason | null;
  stopReason: StopReason;
  cached: number;
  held: number[] | undefined;
  arrival: number;
  firstScheduled: number;
  firstToken: number;
  lastToken: number;
}

/** The model a request names: a served name, a LoRA adapter (its name salts the blocks), or the first served name. */
export function resolveModelName (ctx: SimContext, requested: string | null): { model: string; lora: string | null } {
  if (requested === null) return { model: ctx.modelNames[0], lora: null };
  if (ctx.modelNames.includes(requested)) return { model: requested, lora: null };
  if (ctx.loraModules.some((m) => m.name === requested)) return { model: requested, lora: requested };
  throw new HttpError(404, `The model \`${requested}\` does not exist.`, 'model');
}

export function renderPrompts (ctx: SimContext, g: GenerationRequest): Prompt[] {
  const tk = ctx.tokenizer;
  if (g.endpoint === 'chat') {
    let text: string;
    try {
      text = tk.chatTemplate.render(g.messages, {
        addGenerationPrompt: g.addGenerationPrompt,
        continueFinalMessage: g.continueFinalMessage,
        tools: g.tools,
        chatTemplateKwargs: g.chatTemplateKwargs
      });
    } catch (err) {
      throw badRequest(`Cannot apply the chat template: ${(err as Error).message}`, 'messages');
    }
    return [{ ids: tk.encode(text, { addSpecialTokens: g.addSpecialTokens }), text }];
  }
  return g.prompts.map((p) => {
    if (p.kind === 'text') return { ids: tk.encode(p.text, { addSpecialTokens: g.addSpecialTokens }), text: p.text };
    let max = -1;
    for (const id of p.ids) if (id > max) max = id;
    if (max >= tk.vocabSize) throw badRequest(`Token id ${max} is out of vocabulary`, 'prompt');
    return { ids: p.ids, text: g.echo ? tk.decode(p.ids) : '' };
  });
}

/** vLLM's context-length checks (the engine's, with its messages), as its 400 answer; else the max tokens. */
export function maxTokensFor (maxModelLen: number, promptLen: number, requested: number | null): number {
  const tooLong = contextLengthError(maxModelLen, promptLen, requested);
  if (tooLong !== null) throw badRequest(tooLong.message);
  return requested ?? maxModelLen - promptLen;
}

/** Pulls the exporter's blocks; null (compute locally) when the pull fails, as with kv_load_failure_policy=recompute. */
async function importBlocks (ctx: SimContext, p: ImportParams, promptIds: number[]): Promise<KvImport | null> {
  const pulled = await pullBlocks(p, KV_PULL_TIMEOUT_MS);
  if ('error' in pulled) {
    ctx.log.warn({ remote: `${p.remoteHost}:${p.remotePort}`, remoteRequestId: p.remoteRequestId, err: pulled.error }, 'KV pull failed; computing the prompt locally');
    return null;
  }
  if (pulled.blockSize !== ctx.blockSize) {
    ctx.log.warn({ remoteBlockSize: pulled.blockSize, blockSize: ctx.blockSize }, 'KV pull: block sizes differ; computing the prompt locally');
    return null;
  }
  // Only whole blocks that match this prompt can enter the prefix cache.
  let n = 0;
  const lim = Math.min(pulled.tokenIds.length, promptIds.length);
  while (n < lim && pulled.tokenIds[n] === promptIds[n]) n++;
  n -= n % ctx.blockSize;
  if (n === 0) return null;
  return { prefixTokenIds: promptIds.slice(0, n), sourceEngineId: pulled.engineId };
}

/**
 * Asks the remote offload store about every prompt before the (synchronous) engine sees them, and returns each
 * prompt's block digests: the engine reuses them, and the store client keys its answer by them.
 */
async function prefetchStored (ctx: SimContext, prompts: Prompt[], lora: string | null, cacheSalt: string | null): Promise<BlockDigest[][]> {
  const client = ctx.offloadClient!;
  const hasher = ctx.host.engine.hasher;
  const digests = prompts.map((p) => hasher.extend([], p.ids, lora, cacheSalt, Math.floor((p.ids.length - 1) / ctx.blockSize)));
  await Promise.all(digests.map((d) => client.prefetch(d)));
  return digests;
}

const requestIdHeader = (req: IncomingMessage): string | null => {
  const h = req.headers['x-request-id'];
  return typeof h === 'string' && h !== '' ? h : null;
};

export async function handleGeneration (ctx: SimContext, endpoint: 'chat' | 'completion', body: unknown,
  req: IncomingMessage, res: ServerResponse): Promise<void> {
  const g = parseGenerationRequest(endpoint, body);
  const includeUsage = g.stream && (g.includeUsage || ctx.options.enableForceIncludeUsage);
  const format = new OpenAiFormat(endpoint, { includeUsage, continuousUsage: g.continuousUsage, promptTokensDetails: ctx.options.enablePromptTokensDetails });
  await runGeneration(ctx, g, req, res, format);
}

export interface RunOptions {
  /** The request id; default chatcmpl-/cmpl- and the x-request-id header, request_id, or random hex. */
  id?: string;
  /** Prompts already rendered (a dialect that needed them first); default: rendered from `g`. */
  prompts?: Prompt[];
}

/** Runs a parsed request on the engine and answers in `format`'s shape (headers, stream or body). */
export async function runGeneration (ctx: SimContext, g: GenerationRequest, req: IncomingMessage, res: ServerResponse,
  format: OutputFormat, opts: RunOptions = {}): Promise<void> {
  const endpoint = g.endpoint;
  const { model, lora } = resolveModelName(ctx, g.model);
  const prompts = opts.prompts ?? renderPrompts(ctx, g);
  const maxTokens = prompts.map((p) => maxTokensFor(ctx.maxModelLen, p.ids.length, g.maxTokens));

  // Without a KV connector vLLM never looks at kv_transfer_params (and returns none).
  const intent = ctx.options.noKvTransfer ? { kind: 'none' as const } : classifyKvTransferParams(g.kvTransferParams);
  let kvImport: KvImport | null = null;
  if (intent.kind === 'invalid') {
    ctx.log.warn({ field: intent.reason }, 'Got invalid KVTransferParams: %s. This request will not utilize KVTransfer', intent.reason);
  } else if (intent.kind === 'import') {
    kvImport = await importBlocks(ctx, intent.params, prompts[0].ids);
    if (res.destroyed) return;
  }
  let stored: BlockDigest[][] | null = null;
  if (ctx.offloadClient !== null && kvImport === null) {
    stored = await prefetchStored(ctx, prompts, lora, g.cacheSalt);
    if (res.destroyed) return;
  }

  const id = opts.id ?? `${endpoint === 'chat' ? 'chatcmpl' : 'cmpl'}-${requestIdHeader(req) ?? g.requestId ?? randomBytes(16).toString('hex')}`;
  const created = Math.floor(Date.now() / 1000);
  const eos = g.ignoreEos ? [] : ctx.tokenizer.eosTokenIds;
  const userStopIds = new Set(g.stopTokenIds);
  const maxStopLen = g.stop.reduce((m, s) => Math.max(m, s.length), 0);
  format.begin({ id, created, model, promptTokens: prompts[0].ids.length, maxTokens: maxTokens[0] });
  const exporting = intent.kind === 'export';

  const choices: Choice[] = [];
  prompts.forEach((prompt, promptIdx) => {
    for (let j = 0; j < g.n; j++) {
      choices.push({
        index: promptIdx * g.n + j,
        engineId: `${id}-${ctx.nextSeq()}`,
        prompt,
        promptIdx,
        maxTokens: maxTokens[promptIdx],
        genIds: [],
        detok: new IncrementalDetokenizer(ctx.tokenizer),
        text: '',
        sent: 0,
        echoed: false,
        finish: null,
        stopReason: null,
        cached: -1,
        held: undefined,
        arrival: 0,
        firstScheduled: NaN,
        firstToken: NaN,
        lastToken: NaN
      });
    }
  });

  let remaining = choices.length;
  let done = false;
  let headersSent = false;
  let rolesSent = false;

  const usageCounts = (): UsageCounts => {
    let promptTokens = 0;
    let completionTokens = 0;
    let cachedTokens = 0;
    for (const c of choices) {
      completionTokens += c.genIds.length;
      if (c.index % g.n === 0) {
        promptTokens += c.prompt.ids.length;
        cachedTokens += Math.max(0, c.cached);
      }
    }
    return { promptTokens, completionTokens, cachedTokens };
  };

  const startStream = (): void => {
    if (headersSent) return;
    headersSent = true;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  };

  const finishChoice = (c: Choice, now: number, m: RequestMetrics | undefined): void => {
    remaining--;
    if (c.finish !== 'abort' && !Number.isNaN(c.firstScheduled)) {
      const times = m !== undefined
        ? { arrival: m.arrivalTime, firstScheduled: m.firstScheduledTime, firstToken: m.firstTokenTime, finished: m.finishTime }
        : { arrival: c.arrival, firstScheduled: c.firstScheduled, firstToken: Number.isNaN(c.firstToken) ? now : c.firstToken, finished: now };
      ctx.onRequestFinished?.(requestIdHeader(req), times, { promptTokens: c.prompt.ids.length, cachedTokens: Math.max(0, c.cached) });
      ctx.metrics.observeFinished({
        times,
        promptTokens: c.prompt.ids.length,
        generationTokens: c.genIds.length,
        maxTokens: c.maxTokens,
        n: g.n,
        finishReason: c.finish as FinishReason
      });
    } else {
      ctx.metrics.observeAborted();
    }
  };

  const complete = (): void => {
    done = true;
    const engineDead = ctx.host.dead !== null;
    if (g.stream) {
      startStream();
      res.end(format.streamEnd(usageCounts(), engineDead));
      for (const c of choices) if (c.held !== undefined) ctx.host.releaseHeld(c.engineId);
      return;
    }
    if (engineDead) {
      const err = new HttpError(500, 'EngineCore encountered an issue. See stack trace for the root cause.');
      res.writeHead(500, { 'content-type': 'application/json' }).end(format.errorBody(err));
      return;
    }
    let kvParams: Record<string, unknown> | null = null;
    for (const c of choices) {
      if (c.held === undefined) continue;
      // Newer NixlConnector returns params for length-capped and stopped requests; one choice can be exported.
      if (exporting && kvParams === null && (c.finish === 'length' || c.finish === 'stop')) {
        const side = ctx.sideChannel();
        kvParams = exportParams(c.held, ctx.engineId, c.engineId, side.host, side.port);
      } else {
        ctx.host.releaseHeld(c.engineId);
      }
    }
    const results: ChoiceResult[] = choices.map((c) => ({
      index: c.index,
      text: (g.echo ? c.prompt.text : '') + c.text,
      finishReason: c.finish,
      stopReason: c.stopReason
    }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(format.body(results, usageCounts(), kvParams));
  };

  const emit = (c: Choice, final: boolean): void => {
    if (!g.stream) return;
    startStream();
    if (!rolesSent) {
      rolesSent = true;
      const start = format.streamStart(choices.map((other) => other.index));
      if (start !== '') res.write(start);
    }
    let delta = c.text.length > c.sent ? c.text.slice(c.sent) : '';
    if (g.echo && !c.echoed) {
      delta = c.prompt.text + delta;
      c.echoed = true;
    }
    c.sent = Math.max(c.sent, c.text.length);
    if (delta === '' && !final) return;
    const bytes = format.streamDelta(c.index, delta, final ? c.finish : null, c.stopReason, c.prompt.ids.length, c.genIds.length);
    if (bytes !== '') res.write(bytes);
  };

  const onOutput = (c: Choice, out: RequestOutput, start: number, end: number): void => {
    if (done || c.finish !== null) return;
    if (Number.isNaN(c.firstScheduled)) c.firstScheduled = start;
    if (c.cached < 0) c.cached = out.numCachedTokens;
    let visible = out.newTokenIds;
    if (out.newTokenIds.length > 0) {
      if (Number.isNaN(c.firstToken)) {
        c.firstToken = end;
        ctx.metrics.observeFirstToken(end - c.arrival);
      } else {
        ctx.metrics.observeInterTokenLatency(end - c.lastToken, out.newTokenIds.length);
      }
      c.lastToken = end;
      c.genIds.push(...out.newTokenIds);
    }
    if (out.finished !== null) {
      c.finish = out.finished;
      c.held = out.heldBlockIds;
      if (out.stopReason !== null) {
        if (visible[visible.length - 1] === out.stopReason) visible = visible.slice(0, -1);
        // EOS ends with stop_reason null; a client's stop_token_ids report the id.
        c.stopReason = userStopIds.has(out.stopReason) ? out.stopReason : null;
      }
    }
    if (visible.length > 0 || out.finished !== null) {
      const before = c.text.length;
      c.detok.push(visible, out.finished !== null);
      c.text = c.detok.text;
      if (g.stop.length > 0 && c.finish === null && c.genIds.length >= g.minTokens && c.text.length > before) {
        const from = Math.max(0, before - maxStopLen + 1);
        let at = -1;
        let hit = '';
        for (const s of g.stop) {
          const i = c.text.indexOf(s, from);
          if (i >= 0 && (at < 0 || i < at)) { at = i; hit = s; }
        }
        if (at >= 0) {
          // A stop string: vLLM trims it from the text and reports it as stop_reason.
          c.text = c.text.slice(0, at);
          c.finish = 'stop';
          c.stopReason = hit;
          ctx.host.abort(c.engineId);
        }
      }
    }
    if (c.finish !== null) {
      emit(c, true);
      finishChoice(c, end, out.metrics);
      if (remaining === 0) complete();
    } else if (out.newTokenIds.length > 0) {
      emit(c, false);
    }
  };

  // A write racing a client that just left must not surface as an unhandled 'error'.
  res.on('error', (err) => ctx.log.debug({ err }, 'response stream error'));
  res.on('close', () => {
    if (done) return;
    done = true;
    for (const c of choices) {
      if (c.finish === null) {
        ctx.host.abort(c.engineId);
        ctx.metrics.observeAborted();
      } else if (c.held !== undefined) {
        ctx.host.releaseHeld(c.engineId);
      }
    }
  });

  const stopTokenIds = [...new Set([...eos, ...g.stopTokenIds])];
  for (const c of choices) {
    c.arrival = ctx.host.now();
    const simReq: SimRequest = {
      id: c.engineId,
      promptTokenIds: c.prompt.ids,
      maxTokens: c.maxTokens,
      minTokens: Math.min(g.minTokens, c.maxTokens),
      ignoreEos: g.ignoreEos,
      stopTokenIds,
      loraName: lora,
      cacheSalt: g.cacheSalt,
      seed: (g.seed ?? ctx.options.seed) + (c.index % g.n),
      kvExport: exporting,
      kvImport: c.promptIdx === 0 ? kvImport : null,
      arrivalTime: c.arrival,
      priority: g.priority
    };
    if (stored !== null) simReq.blockHashes = stored[c.promptIdx];
    try {
      ctx.host.submit(simReq, (out, start, end) => onOutput(c, out, start, end));
    } catch (err) {
      // Nothing of this request may stay in the engine once it is refused.
      done = true;
      for (const other of choices) ctx.host.abort(other.engineId);
      if (err instanceof EngineFullError) throw new HttpError(503, 'The engine is at capacity (waiting queue full); retry later.');
      if (err instanceof RangeError || (err instanceof EarError && err.status === 400)) throw badRequest(err.message);
      throw err;
    }
  }
  // Some APIs announce the response as soon as it is accepted (Responses: response.created, in_progress).
  if (g.stream && !done && !headersSent) {
    const prelude = format.streamPrelude();
    if (prelude !== '') {
      startStream();
      res.write(prelude);
    }
  }
}
