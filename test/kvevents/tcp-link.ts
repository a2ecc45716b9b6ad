// A TCP link between a KV-event subscriber and an engine's PUB socket that a test can cut (the connection drops,
// ZeroMQ reconnects at once) or take down and bring back (nothing connects meanwhile): EAR losing its engine
// for a while, as a network partition or a gateway-side outage would make it.
import { createServer, connect, type Server, type Socket } from 'node:net';

export class TcpLink {
  readonly #target: { host: string; port: number };
  readonly #open = new Set<Socket>();
  #server: Server | null = null;
  port = 0;

  private constructor (target: { host: string; port: number }) {
    this.#target = target;
  }

  /** A link to `endpoint` (tcp://host:port), listening on an ephemeral loopback port. */
  static async to (endpoint: string): Promise<TcpLink> {
    const m = /^tcp:\/\/([^:]+):(\d+)$/.exec(endpoint);
    if (m === null) throw new Error(`not a tcp endpoint: ${endpoint}`);
    const link = new TcpLink({ host: m[1], port: Number(m[2]) });
    await link.up();
    return link;
  }

  /** Where the subscriber connects. */
  get endpoint (): string {
    return `tcp://127.0.0.1:${this.port}`;
  }

  /** Listens (again, on the same port once it had one) and pipes every connection to the target. */
  async up (): Promise<void> {
    if (this.#server !== null) return;
    const server = createServer((client) => {
      const engine = connect(this.#target.port, this.#target.host);
      for (const s of [client, engine]) {
        this.#open.add(s);
        s.on('close', () => { this.#open.delete(s); client.destroy(); engine.destroy(); });
        s.on('error', () => {});
      }
      client.pipe(engine).pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.#server = server;
    this.port = (server.address() as { port: number }).port;
  }

  /** Drops every connection; the link stays up, so ZeroMQ reconnects through it at once. */
  cut (): void {
    for (const s of this.#open) s.destroy();
  }

  /** Drops every connection and stops listening: nothing gets through until up(). */
  async down (): Promise<void> {
    const server = this.#server;
    this.#server = null;
    // Stop listening before the connections drop: ZeroMQ reconnects at once, and a connection the kernel completed
    // meanwhile would let a reconnect (and its replay check) through a link that is meant to be down.
    const closed = server === null ? Promise.resolve() : new Promise<void>((resolve) => server.close(() => resolve()));
    this.cut();
    await closed;
  }
}
