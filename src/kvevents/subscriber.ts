// Follows one engine's KV-event stream (vllm-wire.md §1.6): a SUB socket for live batches and a DEALER for
// the replay ROUTER. Batches reach the callback decoded, in sequence order, exactly once. A gap is filled
// from the replay buffer; what cannot be filled (engine restarted, gap older than the buffer, no replay
// endpoint, replay timed out) becomes a resync: the consumer forgets this backend's entries and the stream
// continues from the new sequence number. Applying batches to the index is the consumer's business.
//
// vLLM's batches carry no process epoch, so a restarted engine whose new sequence has passed the last one applied
// looks like a gap. Every replay that continues the stream therefore asks from the last batch applied, not the
// one after, and compares its bytes (each batch carries its timestamp): a different batch at that sequence is
// another process, and the stream starts over from the new engine's replay buffer. A ZeroMQ reconnect runs the
// same check at once (an idle engine sends nothing that would reveal a gap), and the consumer can say the engine
// restarted (its /metrics start time changed): restarted().
//
// ZeroMQ's slow joiner: the SUB joins a moment after connect() (longer through a slow link, or once an engine that
// was down comes up), and what the engine publishes before then never arrives live. So when the SUB first joins
// (its ZMTP handshake), the replay is asked for everything past the last batch applied (from 0 if none): an
// engine that goes quiet after a burst is still learnt.
import { Dealer, Subscriber } from 'zeromq';
import { decodeBatch, type DecodedBatch } from './decode.js';
import { buildReplayRequest, parsePubMessage, parseReplayReply } from './frames.js';

export interface KvBackendConfig {
  /** The backend (pod) id this stream belongs to; passed back with every batch. */
  id: string;
  /** The engine's PUB endpoint as seen from here, e.g. tcp://10.0.0.7:5557, or tcp://*:5557 to bind. */
  endpoint: string;
  /** The engine's replay ROUTER endpoint (vLLM `replay_endpoint`), or null/absent: gaps then resync. */
  replayEndpoint?: string | null;
  /** SUB prefix filter (vLLM topics are exact strings; '' takes every message). */
  topic?: string;
  /** Default: bind when the endpoint has a wildcard host (*, 0.0.0.0, [::]), else connect (see subscriberBinds). */
  mode?: 'connect' | 'bind';
}

export interface KvSubscriberOptions {
  /** How long the replay may stay silent (per reply) before it is given up and the gap resyncs. */
  replayTimeoutMs?: number;
  /** Reconnect (and bind retry) backoff: starts here and doubles up to reconnectMaxMs. */
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
  /**
   * Messages ZMQ queues for us while we replay or fall behind (default 10 000, ~100 MB at 10 KB a batch);
   * past it the engine's PUB drops them, which we see as a gap and fill from the replay buffer.
   */
  receiveHighWaterMark?: number;
  /**
   * Learn what the engine published before we joined: when the SUB first joins (and again on the first live batch
   * if nothing was applied by then), replay past the last batch applied, from 0 if none.
   */
  catchUpOnStart?: boolean;
  /**
   * Replay from 0 right after start, without waiting for a live batch: a gateway that (re)starts while an
   * engine is idle still learns what it holds. Live batches already replayed are told from a restarted
   * engine's by their bytes (the last START_WINDOW replayed payloads are kept until live passes them).
   */
  replayOnStart?: boolean;
  /**
   * After this long without a live batch, ask the replay socket once for anything past the last sequence: ZMQ may
   * drop the last batches of a burst, and no later batch would then reveal the gap (0 disables). Default 1000.
   */
  tailCheckMs?: number;
  /** Clock in ms since the epoch, for the apply lag. */
  now?: () => number;
}

export interface KvBatchMessage {
  backendId: string;
  seq: bigint;
  topic: string;
  batch: DecodedBatch;
  /** Came from the replay socket rather than the live stream. */
  replayed: boolean;
}

export interface KvResync {
  backendId: string;
  /**
   * seq-reset: the sequence went backwards (engine restart); engine-restart: another process answers for the last
   * batch applied, or the consumer said so (restarted()); gap-unrecoverable: batches are lost for good.
   */
  reason: 'seq-reset' | 'engine-restart' | 'gap-unrecoverable';
  /** The last sequence number applied before, null if none. */
  lastSeq: bigint | null;
  /** The sequence number the stream continues from. */
  nextSeq: bigint;
}

export interface KvSubscriberHandlers {
  onBatch: (msg: KvBatchMessage) => void;
  /** Clear everything this backend is known to hold; later batches rebuild it. */
  onResync: (r: KvResync) => void;
}

export interface KvSubscriberStats {
  batches: number;
  events: number;
  /** Events with unknown tags, left out by the decoder. */
  skippedEvents: number;
  gaps: number;
  /** Replay requests sent for gaps, the start replay and the catch-up on a first live batch (checks are counted apart). */
  replays: number;
  /** Replays asked after a quiet period, in case the last batches of a burst were dropped (see tailCheckMs). */
  tailChecks: number;
  replayedBatches: number;
  resyncs: number;
  /** Of the resyncs, restarts seen by a replayed batch that differs from the one applied, or told by restarted(). */
  restarts: number;
  /** Checks run because the SUB socket joined its engine again (each replays from the last batch applied, by its bytes). */
  reconnectChecks: number;
  /**
   * Replays asked when the SUB first joined its engine (catchUpOnStart or replayOnStart), for what was published
   * before the join: past the last batch applied, or from 0.
   */
  joinChecks: number;
  /** Payloads or frames that did not decode; counted and skipped. */
  decodeErrors: number;
  /** Live batches already applied from a replay. */
  duplicates: number;
  /** Exceptions thrown by onBatch/onResync (caught so that one bad batch cannot stop the stream). */
  handlerErrors: number;
  /** Socket errors other than closing (each followed by a backoff). */
  socketErrors: number;
  lastSeq: bigint | null;
  /** now − batch ts of the last applied batch, in ms. */
  lastApplyLagMs: number | null;
}

/**
 * Whether a SUB endpoint is bound here: a wildcard host can only be bound (the engines connect to us, llm-d's
 * "centralized" mode); a concrete host or an ipc/inproc path is where the engine bound its PUB, so we connect.
 */
export function subscriberBinds (endpoint: string): boolean {
  return /^tcp:\/\/(\*|0\.0\.0\.0|\[::\]):/.test(endpoint);
}

/** Replayed payloads kept to tell a duplicate live batch from a restarted engine's batch of the same seq. */
const START_WINDOW = 1024;

function sameBytes (a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);
}

/** A batch applied: what a replay from its sequence must answer with again if the engine is the same process. */
interface Applied { seq: bigint; payload: Uint8Array }

function isAgain (err: unknown): boolean {
  return (err as { code?: string })?.code === 'EAGAIN';
}

export class KvEventSubscriber {
  readonly #cfg: Required<Omit<KvBackendConfig, 'replayEndpoint'>> & { replayEndpoint: string | null };
  readonly #handlers: KvSubscriberHandlers;
  readonly #opts: Required<KvSubscriberOptions>;
  readonly #sub: Subscriber;
  #dealer: Dealer | null = null;
  #closed = false;
  #loop: Promise<void> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #wake: (() => void) | null = null;
  /** Live handling and tail checks run one at a time on this chain (both may replay). */
  #serial: Promise<void> = Promise.resolve();
  #tailTimer: NodeJS.Timeout | null = null;
  /** Last sequence number applied (live or replayed). */
  #last: bigint | null = null;
  /** Last sequence number seen on the live stream: the live stream only goes backwards when the publisher restarts. */
  #liveLast: bigint | null = null;
  /** Payloads of the start replay by seq (replayOnStart), until the live stream passes them. */
  #startWindow: Map<bigint, Uint8Array> | null = null;
  /** The last batch applied (its bytes prove a replay comes from the same process). */
  #applied: Applied | null = null;
  /** The last batch applied when the SUB lost its peer: the reconnect check asks for it. */
  #beforeDisconnect: Applied | null = null;
  /** The topic of the last batch applied (replays started without a live batch use it). */
  #topic: string;
  #peerSeen = false;
  readonly #stats: KvSubscriberStats = {
    batches: 0, events: 0, skippedEvents: 0, gaps: 0, replays: 0, tailChecks: 0, replayedBatches: 0, resyncs: 0, restarts: 0, reconnectChecks: 0, joinChecks: 0, decodeErrors: 0,
    duplicates: 0, handlerErrors: 0, socketErrors: 0, lastSeq: null, lastApplyLagMs: null,
  };

  constructor (backend: KvBackendConfig, handlers: KvSubscriberHandlers, opts: KvSubscriberOptions = {}) {
    this.#cfg = {
      id: backend.id,
      endpoint: backend.endpoint,
      replayEndpoint: backend.replayEndpoint ?? null,
      topic: backend.topic ?? '',
      mode: backend.mode ?? (subscriberBinds(backend.endpoint) ? 'bind' : 'connect'),
    };
    this.#handlers = handlers;
    this.#opts = {
      replayTimeoutMs: opts.replayTimeoutMs ?? 2000,
      reconnectMinMs: opts.reconnectMinMs ?? 100,
      reconnectMaxMs: opts.reconnectMaxMs ?? 5000,
      receiveHighWaterMark: opts.receiveHighWaterMark ?? 10_000,
      catchUpOnStart: opts.catchUpOnStart ?? true,
      replayOnStart: opts.replayOnStart ?? false,
      tailCheckMs: opts.tailCheckMs ?? 1000,
      now: opts.now ?? Date.now,
    };
    this.#topic = this.#cfg.topic;
    this.#sub = new Subscriber(this.#socketOptions({ receiveHighWaterMark: this.#opts.receiveHighWaterMark }));
    this.#sub.subscribe(this.#cfg.topic);
    if (this.#cfg.replayEndpoint !== null) this.#watchPeer();
  }

  get backendId (): string { return this.#cfg.id; }

  /** In bind mode, the address actually bound (resolves a port of *), else null. */
  get boundEndpoint (): string | null {
    return this.#cfg.mode === 'bind' && !this.#closed ? this.#sub.lastEndpoint : null;
  }

  /** Connects (or binds) and starts delivering. Throws on an endpoint ZMQ rejects outright. */
  async start (): Promise<void> {
    if (this.#loop !== null || this.#closed) throw new Error('KvEventSubscriber already started or closed');
    if (this.#cfg.mode === 'connect') this.#sub.connect(this.#cfg.endpoint);
    else await this.#bindWithRetry();
    this.#loop = this.#run();
  }

  stats (): KvSubscriberStats {
    return { ...this.#stats };
  }

  /**
   * The engine restarted (its consumer saw it elsewhere, e.g. a new /metrics process start time): resyncs, and
   * learns the new process's cache from its replay buffer. Resolves once done (queued behind live handling).
   */
  restarted (): Promise<void> {
    return this.#exclusive(async () => {
      if (this.#closed) return;
      await this.#startOver();
    });
  }

  /** Closes both sockets and waits for the receive loop to end; no callback fires after this resolves. */
  async close (): Promise<void> {
    if (this.#closed) return this.#loop ?? undefined;
    this.#closed = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    if (this.#tailTimer !== null) clearTimeout(this.#tailTimer);
    this.#wake?.();
    this.#sub.close();
    this.#dealer?.close();
    this.#dealer = null;
    await this.#loop;
  }

  #socketOptions<T extends object> (extra: T): T & { linger: number; reconnectInterval: number; reconnectMaxInterval: number } {
    // linger 0: close() must not wait on undelivered replay requests.
    return { linger: 0, reconnectInterval: this.#opts.reconnectMinMs, reconnectMaxInterval: this.#opts.reconnectMaxMs, ...extra };
  }

  #sleep (ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
      this.#timer = setTimeout(() => { this.#timer = null; this.#wake = null; resolve(); }, ms);
    });
  }

  async #bindWithRetry (): Promise<void> {
    for (let delay = this.#opts.reconnectMinMs; !this.#closed; delay = Math.min(delay * 2, this.#opts.reconnectMaxMs)) {
      try {
        await this.#sub.bind(this.#cfg.endpoint);
        return;
      } catch (err) {
        // A busy address can free up (a previous process exiting); anything else is a configuration error.
        if ((err as { code?: string }).code !== 'EADDRINUSE') throw err;
        this.#stats.socketErrors++;
        await this.#sleep(delay);
      }
    }
  }

  async #run (): Promise<void> {
    if (this.#opts.replayOnStart && this.#cfg.replayEndpoint !== null) {
      this.#startWindow = new Map();
      // On the chain: the join check may come while this replay is still reading.
      await this.#exclusive(() => this.#replay(0n, this.#cfg.topic));
    }
    let delay = this.#opts.reconnectMinMs;
    while (!this.#closed) {
      let frames: Buffer[];
      try {
        frames = await this.#sub.receive();
      } catch {
        if (this.#closed) return;
        this.#stats.socketErrors++;
        await this.#sleep(delay);
        delay = Math.min(delay * 2, this.#opts.reconnectMaxMs);
        continue;
      }
      delay = this.#opts.reconnectMinMs;
      let msg;
      try {
        msg = parsePubMessage(frames);
      } catch {
        this.#stats.decodeErrors++;
        continue;
      }
      const { seq, topic, payload } = msg;
      await this.#exclusive(() => this.#onLive(seq, topic, payload));
      this.#armTailCheck(topic);
    }
  }

  #exclusive (fn: () => Promise<void>): Promise<void> {
    const run = this.#serial.then(fn);
    this.#serial = run.catch(() => {});
    return run;
  }

  /** One tail check per quiet period after live traffic or the join check (an idle engine is not polled). */
  #armTailCheck (topic: string): void {
    if (this.#opts.tailCheckMs <= 0 || this.#cfg.replayEndpoint === null) return;
    if (this.#tailTimer !== null) clearTimeout(this.#tailTimer);
    this.#tailTimer = setTimeout(() => {
      this.#tailTimer = null;
      if (this.#closed) return;
      void this.#exclusive(async () => {
        if (this.#closed) return;
        this.#stats.tailChecks++;
        await this.#replay(this.#last === null ? 0n : this.#last + 1n, topic, false, this.#applied);
      });
    }, this.#opts.tailCheckMs);
    this.#tailTimer.unref();
  }

  async #onLive (seq: bigint, topic: string, payload: Uint8Array): Promise<void> {
    const w = this.#startWindow;
    if (this.#liveLast !== null && seq <= this.#liveLast) {
      // A new publisher: start over as if just joined (so its replay buffer can fill in what we missed of it).
      this.#startWindow = null;
      this.#resync('seq-reset', seq);
      this.#forgetPosition();
    } else if (w !== null) {
      if (this.#last !== null && seq <= this.#last) {
        // Already replayed at start, or a restarted engine reusing the seq: only the bytes tell.
        const p = w.get(seq);
        if (p === undefined || !sameBytes(p, payload)) {
          this.#startWindow = null;
          this.#resync('seq-reset', seq);
          this.#forgetPosition();
        }
      } else {
        this.#startWindow = null;
      }
    }
    this.#liveLast = seq;
    const last = this.#last;
    if (last === null) {
      if (this.#opts.catchUpOnStart && this.#cfg.replayEndpoint !== null && seq > 0n) await this.#replay(0n, topic);
    } else if (seq > last + 1n) {
      this.#stats.gaps++;
      if (this.#cfg.replayEndpoint !== null) await this.#replay(last + 1n, topic, true, this.#applied);
    }
    if (this.#closed) return;
    // What the replay (if any) applied decides: seq already applied, next in line, or still past a hole.
    const applied = this.#last;
    if (applied !== null && seq <= applied) {
      this.#stats.duplicates++;
      return;
    }
    if (applied !== null && seq !== applied + 1n) this.#resync('gap-unrecoverable', seq);
    this.#apply(seq, topic, payload, false);
  }

  /**
   * Asks the ROUTER for every buffered batch from `from` on and applies them in order until the end marker. With
   * `anchor` (a batch applied before, at or below `from` - 1) it asks from the anchor's sequence instead: the
   * engine answers with the same bytes there unless it is another process, and then the stream starts over.
   */
  async #replay (from: bigint, topic: string, counted = true, anchor: Applied | null = null): Promise<void> {
    if (this.#closed) return;
    if (counted) this.#stats.replays++;
    const dealer = this.#dealer ??= this.#newDealer();
    let restarted = false;
    try {
      await dealer.send(buildReplayRequest(anchor?.seq ?? from));
      for (;;) {
        const frames = await dealer.receive();
        if (this.#closed) return;
        let r;
        try {
          r = parseReplayReply(frames);
        } catch {
          this.#stats.decodeErrors++;
          continue;
        }
        if (r.end) break;
        // Read to the end marker, so the start-over's replay cannot read this answer's tail.
        if (restarted) continue;
        if (anchor !== null && r.seq === anchor.seq) {
          restarted = !sameBytes(anchor.payload, r.payload);
          continue;
        }
        const last = this.#last;
        if (last !== null && r.seq <= last) continue;
        if (last !== null && r.seq !== last + 1n) this.#resync('gap-unrecoverable', r.seq);
        this.#stats.replayedBatches++;
        const w = this.#startWindow;
        if (w !== null) {
          w.set(r.seq, r.payload);
          if (w.size > START_WINDOW) w.delete(w.keys().next().value as bigint);
        }
        this.#apply(r.seq, topic, r.payload, true);
      }
    } catch (err) {
      if (this.#closed) return;
      if (!isAgain(err)) this.#stats.socketErrors++;
      // Replies to this request may still arrive; a fresh socket makes sure the next replay cannot read them.
      dealer.close();
      if (this.#dealer === dealer) this.#dealer = null;
      return;
    }
    if (restarted) await this.#startOver();
  }

  /** Another engine process: forget what the old one told us and learn the new one's cache from its replay buffer. */
  async #startOver (): Promise<void> {
    this.#stats.restarts++;
    this.#startWindow = null;
    this.#resync('engine-restart', 0n);
    this.#forgetPosition();
    if (this.#cfg.replayEndpoint !== null) await this.#replay(0n, this.#topic);
  }

  /** After a resync: the next batch starts the stream again (and the old process's batches prove nothing). */
  #forgetPosition (): void {
    this.#last = null;
    this.#applied = null;
    this.#beforeDisconnect = null;
  }

  /**
   * Runs when the SUB has joined a peer: its ZMTP handshake is done, so the engine's PUB gets our subscription with
   * it and what it publishes from then on comes live (a TCP connect alone may be a proxy's, the engine not there yet).
   * The first join asks the replay for what was published before it (the join check). ZeroMQ reconnects by itself,
   * and an engine restarted meanwhile may be idle (no live batch would reveal it): when the SUB gets a peer again
   * after losing one, ask the replay from the last batch applied before the loss (the reconnect check), which also
   * brings what was published while we were away.
   */
  #watchPeer (): void {
    const events = this.#sub.events;
    events.on('disconnect', () => {
      if (this.#beforeDisconnect === null) this.#beforeDisconnect = this.#applied;
    });
    events.on('handshake', () => {
      if (this.#closed) return;
      const first = !this.#peerSeen;
      this.#peerSeen = true;
      void this.#exclusive(() => this.#joined(first));
    });
  }

  /**
   * Batches published while the SUB had not joined never come live, and an engine that then stays quiet shows no
   * gap: replay past the last batch applied (checked by its bytes), or from 0. After a resync while disconnected
   * (a restart seen by a tail check, or restarted()) there is no batch from before the loss: the anchor is then the
   * last one applied. The tail check after it covers a batch published while our subscription was on its way.
   */
  async #joined (first: boolean): Promise<void> {
    const anchor = first ? this.#applied : this.#beforeDisconnect ?? this.#applied;
    if (!first) this.#beforeDisconnect = null;
    // Without catch-up, what an engine published before the first live batch is not learnt.
    if (this.#closed || (this.#last === null && !this.#opts.catchUpOnStart && !this.#opts.replayOnStart)) return;
    if (first) this.#stats.joinChecks++;
    else this.#stats.reconnectChecks++;
    await this.#replay(this.#last === null ? 0n : this.#last + 1n, this.#topic, false, anchor);
    if (!this.#closed) this.#armTailCheck(this.#topic);
  }

  #newDealer (): Dealer {
    const d = new Dealer(this.#socketOptions({ receiveTimeout: this.#opts.replayTimeoutMs, sendTimeout: this.#opts.replayTimeoutMs }));
    d.connect(this.#cfg.replayEndpoint!);
    return d;
  }

  #resync (reason: KvResync['reason'], nextSeq: bigint): void {
    this.#stats.resyncs++;
    try {
      this.#handlers.onResync({ backendId: this.#cfg.id, reason, lastSeq: this.#last, nextSeq });
    } catch {
      this.#stats.handlerErrors++;
    }
  }

  #apply (seq: bigint, topic: string, payload: Uint8Array, replayed: boolean): void {
    if (this.#closed) return;
    this.#last = seq;
    this.#applied = { seq, payload };
    this.#topic = topic;
    this.#stats.lastSeq = seq;
    let batch: DecodedBatch;
    try {
      batch = decodeBatch(payload);
    } catch {
      this.#stats.decodeErrors++;
      return;
    }
    this.#stats.batches++;
    this.#stats.events += batch.events.length;
    this.#stats.skippedEvents += batch.skippedEvents;
    this.#stats.lastApplyLagMs = this.#opts.now() - batch.ts * 1000;
    try {
      this.#handlers.onBatch({ backendId: this.#cfg.id, seq, topic, batch, replayed });
    } catch {
      this.#stats.handlerErrors++;
    }
  }
}
