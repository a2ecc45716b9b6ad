// vLLM's ZmqEventPublisher, on the wire (vllm-wire.md §1.6): a PUB socket sending 3 frames
// (topic, seq as 8-byte big-endian from 0, payload), a replay buffer of the last `bufferSteps` sent batches,
// and an optional ROUTER replay socket: [id, "", start_seq8] → [id, "", seq8, payload]… then [id, "", END_SEQ, ""].
// It moves bytes only: the caller encodes each batch (codec.encodeBatch) before publishing.
import { Publisher, Router } from 'zeromq';
import { buildPubMessage, buildReplayReply, parseReplayRequest } from '../kvevents/frames.js';
import type { KvEventsConfig } from './kv-events-config.js';
import { shouldBind } from './kv-events-config.js';

export interface PublisherLog {
  warn (obj: object, msg: string): void;
}

export class KvEventPublisher {
  /** Actual endpoints after binding (wildcard ports resolved); the configured one when connecting. */
  endpoint = '';
  replayEndpoint: string | null = null;
  /** Batches dropped because the send queue held max_queue_size batches (vLLM blocks the engine instead). */
  droppedBatches = 0;
  invalidReplayRequests = 0;
  private nextSeq = 0n;
  private readonly pub: Publisher;
  private readonly router: Router | null;
  private readonly queue: Uint8Array[] = [];
  /** Sent batches, oldest first, at most bufferSteps (vLLM's deque(maxlen=buffer_steps)). */
  private readonly buffer: Array<[bigint, Uint8Array]> = [];
  private sending = false;
  private closed = false;
  private idle: Promise<void> = Promise.resolve();
  private markIdle: () => void = () => {};

  private constructor (private readonly cfg: KvEventsConfig, private readonly log: PublisherLog | null) {
    this.pub = new Publisher({ sendHighWaterMark: cfg.hwm, linger: 0 });
    this.router = cfg.replayEndpoint !== null ? new Router({ linger: 0 }) : null;
  }

  static async open (cfg: KvEventsConfig, log: PublisherLog | null = null): Promise<KvEventPublisher> {
    const p = new KvEventPublisher(cfg, log);
    try {
      if (shouldBind(cfg.endpoint)) {
        await p.pub.bind(cfg.endpoint);
        p.endpoint = p.pub.lastEndpoint ?? cfg.endpoint;
      } else {
        p.pub.connect(cfg.endpoint);
        p.endpoint = cfg.endpoint;
      }
      if (p.router !== null && cfg.replayEndpoint !== null) {
        await p.router.bind(cfg.replayEndpoint);
        p.replayEndpoint = p.router.lastEndpoint ?? cfg.replayEndpoint;
        void p.serveReplay(p.router);
      }
    } catch (err) {
      p.pub.close();
      p.router?.close();
      throw new Error(`kv events: cannot open ${cfg.endpoint}${cfg.replayEndpoint !== null ? ` / replay ${cfg.replayEndpoint}` : ''}: ${(err as Error).message}`);
    }
    return p;
  }

  /** Queues one encoded batch; sequence numbers are given at send time, as in vLLM. */
  publish (payload: Uint8Array): void {
    if (this.closed) return;
    if (this.queue.length >= this.cfg.maxQueueSize) {
      this.droppedBatches++;
      return;
    }
    this.queue.push(payload);
    if (!this.sending) void this.drain();
  }

  /** Sequence number the next sent batch gets. */
  get sequence (): bigint { return this.nextSeq; }

  /** Resolves when every queued batch has been handed to zeromq. */
  flushed (): Promise<void> { return this.sending ? this.idle : Promise.resolve(); }

  private async drain (): Promise<void> {
    this.sending = true;
    this.idle = new Promise((resolve) => { this.markIdle = resolve; });
    while (this.queue.length > 0 && !this.closed) {
      const payload = this.queue.shift() as Uint8Array;
      const seq = this.nextSeq;
      try {
        await this.pub.send(buildPubMessage(this.cfg.topic, seq, payload));
      } catch (err) {
        // Only sent batches get a number and a place in the replay buffer.
        if (!this.closed) this.log?.warn({ err: (err as Error).message }, 'kv events: send failed, batch dropped');
        continue;
      }
      this.nextSeq++;
      this.buffer.push([seq, payload]);
      if (this.buffer.length > this.cfg.bufferSteps) this.buffer.shift();
    }
    this.sending = false;
    this.markIdle();
  }

  private async serveReplay (router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        let request: { identity: Uint8Array; startSeq: bigint };
        try {
          request = parseReplayRequest(frames);
        } catch {
          this.invalidReplayRequests++;
          this.log?.warn({ frames: frames.length }, 'Invalid replay request');
          continue;
        }
        // Snapshot: batches sent while replying go out on PUB and are not part of this reply.
        const entries = this.buffer.filter(([seq]) => seq >= request.startSeq);
        for (const [seq, payload] of entries) await router.send(buildReplayReply(request.identity, seq, payload));
        await router.send(buildReplayReply(request.identity, 0n));
      }
    } catch (err) {
      if (!this.closed) this.log?.warn({ err: (err as Error).message }, 'kv events: replay socket stopped');
    }
  }

  async close (): Promise<void> {
    if (this.closed) return;
    await this.flushed();
    this.closed = true;
    this.pub.close();
    this.router?.close();
  }
}
