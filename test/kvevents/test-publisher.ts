// A stand-in for vLLM's ZmqEventPublisher (vllm-wire.md §1.6) for tests: an XPUB (a PUB that also tells us
// when a subscriber has joined, so no message is lost to ZMQ's slow-joiner effect) and a replay ROUTER over a
// bounded buffer. publish(..., { drop: true }) buffers a batch without sending it, to make gaps on purpose.
import { Router, XPublisher } from 'zeromq';
import { buildPubMessage, buildReplayReply, parseReplayRequest } from '../../src/kvevents/frames.js';

export interface TestPublisherOptions {
  topic?: string;
  /** vLLM's buffer_steps. */
  bufferSteps?: number;
  /** Open the replay ROUTER (default true). */
  replay?: boolean;
  /** The ROUTER reads requests but never answers (to exercise the replay timeout). */
  silentReplay?: boolean;
  /** Connect the PUB to a bound subscriber (llm-d's centralized mode) instead of binding it. */
  connectTo?: string;
  /** Bind the PUB here (e.g. the address of a previous publisher, to play an engine restart); default an ephemeral port. */
  bindTo?: string;
  /** The PUB's send high-water mark (messages queued per subscriber before ZMQ drops). */
  sendHighWaterMark?: number;
}

export class TestPublisher {
  readonly topic: string;
  readonly #bufferSteps: number;
  readonly #silent: boolean;
  readonly #pub: XPublisher;
  readonly #router: Router | null;
  #buffer: Array<[bigint, Uint8Array]> = [];
  #seq = 0n;
  #routerLoop: Promise<void> = Promise.resolve();
  endpoint = '';
  replayEndpoint: string | null = null;
  replayRequests = 0;

  private constructor (opts: TestPublisherOptions) {
    this.topic = opts.topic ?? '';
    this.#bufferSteps = opts.bufferSteps ?? 10_000;
    this.#silent = opts.silentReplay ?? false;
    this.#pub = new XPublisher({ linger: 0, ...(opts.sendHighWaterMark !== undefined ? { sendHighWaterMark: opts.sendHighWaterMark } : {}) });
    this.#router = opts.replay === false ? null : new Router({ linger: 0 });
  }

  static async start (opts: TestPublisherOptions = {}): Promise<TestPublisher> {
    const p = new TestPublisher(opts);
    if (opts.connectTo !== undefined) {
      p.#pub.connect(opts.connectTo);
      p.endpoint = opts.connectTo;
    } else {
      // ZMQ releases a closed socket's port on its I/O thread, a moment after close(): retry a busy address.
      for (let attempt = 0; ; attempt++) {
        try {
          await p.#pub.bind(opts.bindTo ?? 'tcp://127.0.0.1:*');
          break;
        } catch (err) {
          if ((err as { code?: string }).code !== 'EADDRINUSE' || attempt >= 100) throw err;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
      p.endpoint = p.#pub.lastEndpoint!;
    }
    if (p.#router !== null) {
      await p.#router.bind('tcp://127.0.0.1:*');
      p.replayEndpoint = p.#router.lastEndpoint!;
      p.#routerLoop = p.#serveReplay(p.#router);
    }
    return p;
  }

  /** Resolves when a subscriber's subscription reaches us. */
  async waitForSubscriber (): Promise<void> {
    const [msg] = await this.#pub.receive();
    if (msg[0] !== 1) throw new Error('expected a subscribe message');
  }

  get nextSeq (): bigint { return this.#seq; }

  /** Publishes (or, with drop, only buffers) the next batch; returns its sequence number. */
  async publish (payload: Uint8Array, opts: { drop?: boolean } = {}): Promise<bigint> {
    const seq = this.#seq++;
    this.#buffer.push([seq, payload]);
    if (this.#buffer.length > this.#bufferSteps) this.#buffer.shift();
    if (!opts.drop) await this.#pub.send(buildPubMessage(this.topic, seq, payload));
    return seq;
  }

  /** Sends arbitrary frames on the PUB socket (malformed messages). */
  async sendRaw (frames: Uint8Array[]): Promise<void> {
    await this.#pub.send(frames);
  }

  /** An engine restart: the sequence starts over at 0 and the replay buffer is empty. */
  restart (): void {
    this.#seq = 0n;
    this.#buffer = [];
  }

  async #serveReplay (router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        let req;
        try {
          req = parseReplayRequest(frames);
        } catch {
          continue;
        }
        this.replayRequests++;
        if (this.#silent) continue;
        for (const [seq, payload] of this.#buffer) if (seq >= req.startSeq) await router.send(buildReplayReply(req.identity, seq, payload));
        await router.send(buildReplayReply(req.identity, 0n));
      }
    } catch {
      // closed
    }
  }

  async close (): Promise<void> {
    this.#pub.close();
    this.#router?.close();
    await this.#routerLoop;
  }
}
