// `ear sim`: one simulated engine behind vLLM's HTTP API (node:http, keep-alive), with vLLM's KV events over
// ZMQ and kv_transfer_params export/import. startSim() is the programmatic entry (tests, demos, the CLI).
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import type { Logger } from 'pino';
import type { KvWireFormat } from '../kvevents/types.js';
import { createTokenizer } from '../tokenize/index.js';
import { SimEngine } from './engine.js';
import { handleGeneration } from './generation-handler.js';
import { HttpError, badRequest, errorJson } from './http-errors.js';
import { defaultKvEventsConfig, kvEventsActive } from './kv-events-config.js';
import { KvEventPublisher } from './kv-publisher.js';
import { KV_PULL_PATH } from './kv-transfer.js';
import { KV_STORE_LOOKUP_PATH, KV_STORE_SAVE_PATH, KV_STORE_STATS_PATH, RemoteOffloadStore } from './offload-store-client.js';
import { handleStoreLookup, handleStoreSave, storeStatsJson } from './offload-store-routes.js';
import { OffloadStore } from './offload-store.js';
import { outputVocabulary } from './output-vocabulary.js';
import { loadProfile } from '../engine-model/profile.js';
import { RealClockHost } from './real-clock-host.js';
import type { RequestFinishedHook, SimContext } from './sim-context.js';
import { SimMetrics } from './sim-metrics.js';
import { resolveSimOptions } from './sim-options.js';
import { encodeEngineBatch, simWireFormat } from './vllm-event-shape.js';
import type { SimOptions } from './sim-options.js';
import { handleDetokenize, handleTokenize } from './tokenize-handler.js';

export interface StartSimOptions extends Partial<SimOptions> {
  /** Defaults to a pino logger at EAR_LOG_LEVEL (info). */
  logger?: Logger;
  /** Called in-process with each finished request's modelled times (the e2e driver's engine TTFT). */
  onRequestFinished?: RequestFinishedHook;
}

export interface SimServer {
  /** http://host:port, with 127.0.0.1 for a wildcard bind. */
  url: string;
  port: number;
  engineId: string;
  /** Actual PUB / replay endpoints when KV events are on (wildcard ports resolved), else null. */
  kvEventsEndpoint: string | null;
  kvReplayEndpoint: string | null;
  /** The engine core and its host, for in-process inspection (tests, demos). */
  engine: SimEngine;
  /** The shared offload store this sim hosts (--kv-offload-serve), or the client of another's (--kv-offload-store). */
  offloadStore: OffloadStore | null;
  offloadClient: RemoteOffloadStore | null;
  close (): Promise<void>;
}

const isWildcard = (host: string): boolean => host === '0.0.0.0' || host === '::' || host === '';
const JSON_HEADERS = { 'content-type': 'application/json' };

function readBody (req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        reject(new HttpError(413, `Request body exceeds ${limit} bytes.`));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

async function readJson (req: IncomingMessage, limit: number): Promise<unknown> {
  const buf = await readBody(req, limit);
  try {
    return JSON.parse(buf.toString('utf8'));
  } catch (err) {
    throw badRequest(`JSON decode error: ${(err as Error).message}`);
  }
}

function modelCards (ctx: SimContext): string {
  const created = Math.floor(Date.now() / 1000);
  return JSON.stringify({
    object: 'list',
    data: [
      ...ctx.modelNames.map((id) => ({ id, root: ctx.root, parent: null, maxModelLen: ctx.maxModelLen as number | null })),
      // vLLM lists adapters with their path as root, their base as parent, and no max_model_len.
      ...ctx.loraModules.map((m) => ({ id: m.name, root: m.path, parent: m.baseModelName ?? ctx.modelNames[0], maxModelLen: null }))
    ].map(({ id, root, parent, maxModelLen }) => ({
      id,
      object: 'model',
      created,
      owned_by: 'vllm',
      root,
      parent,
      max_model_len: maxModelLen,
      permission: [{
        id: `modelperm-${randomBytes(16).toString('hex')}`,
        object: 'model_permission',
        created,
        allow_create_engine: false,
        allow_sampling: true,
        allow_logprobs: true,
        allow_search_indices: false,
        allow_view: true,
        allow_fine_tuning: false,
        organization: '*',
        group: null,
        is_blocking: false
      }]
    }))
  });
}

/** The exporter's side of the KV side channel: hand over the held blocks' tokens and release the hold. */
function handleKvPull (ctx: SimContext, raw: unknown): string {
  const b = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  if (typeof b.remote_request_id !== 'string') throw badRequest('remote_request_id: a string is required', 'remote_request_id');
  const id = b.remote_request_id;
  ctx.host.expireHolds();
  const tokens = b.remote_engine_id === ctx.engineId ? ctx.host.engine.heldBlocks(id) : null;
  if (tokens === null) throw new HttpError(404, `No KV blocks held for request ${JSON.stringify(id)} on engine ${ctx.engineId} (never exported, already read, or expired).`);
  const tokenIds = tokens.slice();
  ctx.host.releaseHeld(id);
  return JSON.stringify({ engine_id: ctx.engineId, block_size: ctx.blockSize, token_ids: tokenIds });
}

type Route = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

export async function startSim (options: StartSimOptions = {}): Promise<SimServer> {
  const { logger, onRequestFinished, ...rest } = options;
  const opts = resolveSimOptions(rest);
  const log = logger ?? pino({ level: process.env.EAR_LOG_LEVEL ?? 'info' });

  const base = loadProfile(opts.profile);
  const profile = {
    ...base,
    blockSize: opts.blockSize ?? base.blockSize,
    maxNumSeqs: opts.maxNumSeqs ?? base.maxNumSeqs,
    maxNumBatchedTokens: opts.maxNumBatchedTokens ?? base.maxNumBatchedTokens,
    maxModelLen: opts.maxModelLen ?? base.maxModelLen
  };
  const tokenizer = await createTokenizer(opts.tokenizer);
  const offloadStore = opts.kvOffloadServe ? new OffloadStore(opts.kvOffloadCapacity) : null;
  const lastWarned = { lookup: 0, save: 0 };
  const offloadClient = opts.kvOffloadStore === null ? null : new RemoteOffloadStore(opts.kvOffloadStore, {
    onError: (what, err) => {
      // One warning per kind per 10 s: a store that is down fails every request.
      if (Date.now() - lastWarned[what] < 10_000) return;
      lastWarned[what] = Date.now();
      log.warn({ store: opts.kvOffloadStore, err }, what === 'lookup' ? 'offload store lookup failed; computing the prompt locally' : 'offload store save failed; blocks not stored');
    }
  });
  const engine = new SimEngine({
    profile,
    hashSeed: opts.hashSeed ?? process.env.PYTHONHASHSEED ?? '0',
    numGpuBlocks: opts.numGpuBlocksOverride ?? undefined,
    vocabulary: outputVocabulary(tokenizer),
    stopProbability: opts.stopProbability,
    holdTimeout: opts.kvHoldTimeout,
    offloadStore: offloadStore ?? offloadClient,
    schedulingPolicy: opts.schedulingPolicy,
    longPrefillTokenThreshold: opts.longPrefillTokenThreshold
  });
  const root = opts.model ?? profile.model.name;
  const modelNames = opts.servedModelName ?? [root];

  const kvCfg = opts.kvEventsConfig ?? { ...defaultKvEventsConfig };
  const publisher = kvEventsActive(kvCfg) ? await KvEventPublisher.open(kvCfg, log) : null;
  const wire: KvWireFormat = simWireFormat(opts);

  const metrics = new SimMetrics(modelNames[0], opts.engineIndex, profile.maxModelLen, {
    blockSize: engine.blockSize,
    numGpuBlocks: engine.pool.numBlocks,
    numGpuBlocksOverride: opts.numGpuBlocksOverride,
    gpuMemoryUtilization: profile.gpuMemoryUtilization
  }, () => engine.stats());

  const host = new RealClockHost(engine, opts.timeScale, (events) => {
    if (publisher === null) return;
    publisher.publish(encodeEngineBatch(events, Date.now() / 1000, opts.engineIndex, wire));
  }, () => {
    metrics.syncCounters(engine.stats());
    // The step's blocks are computed now: send them to the remote store.
    offloadClient?.flush();
  });
  host.onListenerError = (err) => log.error({ err }, 'response handler failed; request aborted');

  let port = opts.port;
  let seq = 0;
  const engineId = randomUUID();
  const sideHost = opts.kvTransferHost ?? process.env.VLLM_NIXL_SIDE_CHANNEL_HOST ?? (isWildcard(opts.host) ? '127.0.0.1' : opts.host);
  const ctx: SimContext = {
    options: opts,
    modelNames,
    loraModules: opts.loraModules,
    root,
    maxModelLen: profile.maxModelLen,
    blockSize: engine.blockSize,
    tokenizer,
    host,
    metrics,
    engineId,
    log,
    sideChannel: () => ({ host: sideHost, port }),
    offloadClient,
    nextSeq: () => seq++,
    onRequestFinished
  };

  const json = (res: ServerResponse, body: string, status = 200): void => {
    res.writeHead(status, JSON_HEADERS).end(body);
  };
  const withBody = (fn: (body: unknown, req: IncomingMessage, res: ServerResponse) => Promise<void> | void): Route =>
    async (req, res) => { await fn(await readJson(req, opts.maxBodyBytes), req, res); };

  const routes: Record<string, Partial<Record<string, Route>>> = {
    '/health': {
      GET: async (_req, res) => { res.writeHead(host.dead === null ? 200 : 503, { 'content-length': '0' }).end(); }
    },
    '/v1/models': { GET: async (_req, res) => json(res, modelCards(ctx)) },
    '/metrics': {
      GET: async (_req, res) => {
        metrics.syncCounters(engine.stats());
        const text = await metrics.render();
        res.writeHead(200, { 'content-type': metrics.contentType }).end(text);
      }
    },
    '/v1/chat/completions': { POST: withBody((b, req, res) => handleGeneration(ctx, 'chat', b, req, res)) },
    '/v1/completions': { POST: withBody((b, req, res) => handleGeneration(ctx, 'completion', b, req, res)) },
    '/tokenize': { POST: withBody((b, _req, res) => json(res, handleTokenize(ctx, b))) },
    '/detokenize': { POST: withBody((b, _req, res) => json(res, handleDetokenize(ctx, b))) },
    '/reset_prefix_cache': {
      POST: async (req, res) => {
        await readBody(req, opts.maxBodyBytes);
        // vLLM answers 200 either way and only logs when blocks are still in use.
        if (!host.resetPrefixCache()) log.warn('Failed to reset prefix cache because some blocks are not freed yet');
        res.writeHead(200, { 'content-length': '0' }).end();
      }
    },
    [KV_PULL_PATH]: { POST: withBody((b, _req, res) => json(res, handleKvPull(ctx, b))) }
  };
  if (offloadStore !== null) {
    routes[KV_STORE_LOOKUP_PATH] = { POST: withBody((b, _req, res) => json(res, handleStoreLookup(offloadStore, b, host.now()))) };
    routes[KV_STORE_SAVE_PATH] = { POST: withBody((b, _req, res) => json(res, handleStoreSave(offloadStore, b, host.now()))) };
  }
  if (offloadStore !== null || offloadClient !== null) {
    const tier = offloadStore !== null ? { store: offloadStore } : { client: offloadClient! };
    routes[KV_STORE_STATS_PATH] = { GET: async (_req, res) => json(res, storeStatsJson(engine, tier)) };
  }

  const server: Server = createServer({ keepAlive: true }, (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const byMethod = routes[path];
    const route = byMethod?.[req.method ?? 'GET'];
    if (route === undefined) {
      req.resume();
      const notFound = byMethod === undefined;
      json(res, JSON.stringify({ detail: notFound ? 'Not Found' : 'Method Not Allowed' }), notFound ? 404 : 405);
      return;
    }
    route(req, res).catch((err: unknown) => {
      const e = err instanceof HttpError ? err : new HttpError(500, `Internal error: ${(err as Error)?.message ?? String(err)}`);
      if (e.status >= 500) log.error({ err, path }, 'request failed');
      if (res.headersSent) {
        res.end();
      } else if (!res.destroyed) {
        res.writeHead(e.status, e.status === 413 ? { ...JSON_HEADERS, connection: 'close' } : JSON_HEADERS).end(errorJson(e));
      }
    });
  });
  server.keepAliveTimeout = 5000;
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    else socket.destroy();
  });

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port, opts.host, () => { server.off('error', reject); resolve(); });
    });
  } catch (err) {
    host.close();
    offloadClient?.close();
    await publisher?.close();
    throw err;
  }
  port = (server.address() as AddressInfo).port;
  const urlHost = isWildcard(opts.host) ? '127.0.0.1' : opts.host.includes(':') ? `[${opts.host}]` : opts.host;

  let closing: Promise<void> | null = null;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    engineId,
    kvEventsEndpoint: publisher?.endpoint ?? null,
    kvReplayEndpoint: publisher?.replayEndpoint ?? null,
    engine,
    offloadStore,
    offloadClient,
    close () {
      closing ??= (async () => {
        host.close();
        offloadClient?.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await publisher?.close();
      })();
      return closing;
    }
  };
}
