// The soak's processes: `ear sim` engines and one `ear serve` in front of them, configured through a YAML file so
// the soak can change the backend list with SIGHUP as an operator would. An engine restart is graceful: the
// engine leaves the list (SIGHUP), the gateway drains it, the process stops and starts again on the same HTTP
// port (new KV-event sockets, so a new event sequence), and it rejoins the list (SIGHUP).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { ADMIN, SERVE_LISTENING, SIM_LISTENING, start, stop, type Proc } from '../test/fixtures/processes.js';

export const MODEL = 'm';

export interface FleetOptions {
  engines: number;
  profile: string;
  /** The engines' max-num-seqs: 1 makes an engine's capacity one request at a time (see soak.ts). */
  maxNumSeqs: number;
  /** Where the gateway's YAML lives. */
  dir: string;
  /** Run the gateway under `node --cpu-prof`, profiles (one per thread) written to this folder when it exits. */
  gatewayCpuProf?: string;
}

interface Engine {
  id: string;
  port: number;
  proc: Proc;
  kvEvents: string;
  replay: string;
  /** In the gateway's backend list. */
  listed: boolean;
}

/** What `ear sim` logs once it listens: its KV-event endpoints (bound to wildcard ports, so read back). */
const KV_ENDPOINTS = /"kvEvents":"(tcp:\/\/[^"]+)","kvReplay":"(tcp:\/\/[^"]+)"/;

/**
 * The gateway forgets a session idle this long (default 30 min): soak sessions last a minute or two, so at the
 * default every per-session structure (session table rows, the route threads' previous-turn caches) would keep
 * filling for half an hour before it reached its steady state; at one minute it does within the warm-up, and
 * the expiry path runs all through the soak.
 */
export const SESSION_IDLE_MS = 60_000;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export class SoakFleet {
  readonly #o: FleetOptions;
  readonly #engines: Engine[] = [];
  readonly #config: string;
  #gateway: Proc | null = null;
  /** Reloads the gateway has acknowledged in its log. */
  #reloadsSeen = 0;

  private constructor (o: FleetOptions) {
    this.#o = o;
    this.#config = join(o.dir, 'ear.yaml');
  }

  static async start (o: FleetOptions): Promise<SoakFleet> {
    const f = new SoakFleet(o);
    try {
      for (let i = 0; i < o.engines; i++) f.#engines.push(await f.#startEngine(i, 0));
      f.#writeConfig();
      const prof = o.gatewayCpuProf === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', o.gatewayCpuProf];
      f.#gateway = await start(['serve', '--config', f.#config, '--host', '127.0.0.1', '--port', '0', '--admin-token', ADMIN], SERVE_LISTENING, prof);
      for (const e of f.#engines) await f.#waitHealthy(e.id);
    } catch (err) {
      await f.close();
      throw err;
    }
    return f;
  }

  get url (): string { return this.#gateway!.url; }
  get gatewayPid (): number { return this.#gateway!.child.pid!; }
  get engineIds (): string[] { return this.#engines.map((e) => e.id); }

  /** SIGHUP with the backend list unchanged: the reload path runs under load with nothing to do. */
  async reload (): Promise<void> {
    this.#writeConfig();
    await this.#sighup();
  }

  /** The graceful restart described above; resolves once the engine is back and healthy. */
  async restartEngine (i: number): Promise<void> {
    const e = this.#engines[i];
    e.listed = false;
    this.#writeConfig();
    await this.#sighup();
    await this.#waitGone(e.id);
    await stop(e.proc);
    this.#engines[i] = await this.#startEngine(i, e.port);
    this.#writeConfig();
    await this.#sighup();
    await this.#waitHealthy(e.id);
  }

  async close (): Promise<void> {
    await stop(this.#gateway ?? undefined);
    await Promise.all(this.#engines.map((e) => stop(e.proc)));
  }

  async #startEngine (i: number, port: number): Promise<Engine> {
    const kvEvents = { enable_kv_cache_events: true, publisher: 'zmq', endpoint: 'tcp://127.0.0.1:*', replay_endpoint: 'tcp://127.0.0.1:*' };
    // Qwen3's vocabulary holds the workload's token ids (1000 to 31000); the default byte tokenizer does not.
    const proc = await start(['sim', '--host', '127.0.0.1', '--port', String(port), '--served-model-name', MODEL,
      '--enable-prompt-tokens-details', '--seed', String(i), '--profile', this.#o.profile, '--max-num-seqs', String(this.#o.maxNumSeqs),
      '--stop-probability', '0', '--tokenizer', 'hf:qwen3', '--kv-events-config', JSON.stringify(kvEvents)], SIM_LISTENING);
    const m = KV_ENDPOINTS.exec(proc.out());
    if (m === null) throw new Error(`ear sim did not log its KV-event endpoints: ${proc.out()}`);
    return { id: `sim-${i}`, port: Number(new URL(proc.url).port), proc, kvEvents: m[1], replay: m[2], listed: true };
  }

  #writeConfig (): void {
    const backends = this.#engines.filter((e) => e.listed).map((e) => ({ id: e.id, url: e.proc.url, 'kv-events': e.kvEvents, replay: e.replay }));
    writeFileSync(this.#config, YAML.stringify({ sessionIdleMs: SESSION_IDLE_MS, backends }));
  }

  /** Sends SIGHUP and waits for the gateway to log that it applied the file. */
  async #sighup (): Promise<void> {
    const want = ++this.#reloadsSeen;
    this.#gateway!.child.kill('SIGHUP');
    await this.#until(() => Promise.resolve(countOf(this.#gateway!.out(), 'backends reloaded') >= want), 30_000, 'the gateway to apply a reload');
  }

  async #backends (): Promise<Array<{ id: string; health: string }>> {
    const res = await fetch(`${this.url}/admin/backends`, { headers: { authorization: `Bearer ${ADMIN}` } });
    return (await res.json() as { backends: Array<{ id: string; health: string }> }).backends;
  }

  async #waitGone (id: string): Promise<void> {
    // The gateway's drainTimeoutMs (30 s) bounds a drain; the margin covers the longest soak request.
    await this.#until(async () => !(await this.#backends()).some((b) => b.id === id), 180_000, `${id} to drain`);
  }

  async #waitHealthy (id: string): Promise<void> {
    await this.#until(async () => (await this.#backends()).some((b) => b.id === id && b.health === 'healthy'), 60_000, `${id} to be healthy`);
  }

  async #until (cond: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await cond())) {
      if (Date.now() > deadline) throw new Error(`soak: timed out waiting for ${what}`);
      await sleep(100);
    }
  }
}

function countOf (text: string, needle: string): number {
  let n = 0;
  for (let i = text.indexOf(needle); i >= 0; i = text.indexOf(needle, i + needle.length)) n++;
  return n;
}
