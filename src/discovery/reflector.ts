// List + watch of one collection, as client-go's reflector does it: list (in pages) for a snapshot and its
// resourceVersion, then watch from there with bookmarks (which only move the resourceVersion on); an ERROR
// event with 410 Gone / Expired (the version left the server's history) or a failed page relists from scratch,
// and the snapshot replaces the map (what went while we were away is gone from it). A watch that ends (the
// server's timeoutSeconds, a dropped connection, an API-server restart) resumes from the last resourceVersion;
// one that ended without delivering anything backs off (doubling, jittered, capped) so that a failing server
// is never polled in a busy loop. A watch silent past its timeout plus a margin is taken as dead and replaced.
import { Watch, type KubeConfig } from '@kubernetes/client-node';
import { getJson, KubeApiError } from './kube-client.js';

export interface KubeObject {
  metadata?: { name?: string; resourceVersion?: string; [k: string]: unknown };
  [k: string]: unknown;
}

export interface ReflectorLog {
  info (obj: object, msg: string): void;
  warn (obj: object, msg: string): void;
}

/** Counters a reflector adds to (shared by the reflectors of one discovery, for its metrics). */
export interface ReflectorStats {
  lists: number;
  /** Lists after the first: a 410 Gone, a failed page, or a watch that could not resume. */
  relists: number;
  /** Watches started after the first of a list (each resume). */
  watchRestarts: number;
  /** Lists or watches that failed (network, HTTP status, ERROR events other than 410). */
  errors: number;
  /** Objects not kept because the collection held maxObjects already. */
  overflow: number;
}

export const newReflectorStats = (): ReflectorStats => ({ lists: 0, relists: 0, watchRestarts: 0, errors: 0, overflow: 0 });

export interface ReflectorOptions {
  kc: KubeConfig;
  /** The collection, e.g. /api/v1/namespaces/NS/pods. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Called after the map changed: a list replaced it, or a watch event changed one object. */
  onChange: (objects: ReadonlyMap<string, KubeObject>) => void;
  log: ReflectorLog;
  stats?: ReflectorStats;
  /** Backoff after an unproductive watch or a failed list: from min, doubling to max (ms). */
  backoffMinMs?: number;
  backoffMaxMs?: number;
  /** The server ends each watch after a random time in [t, 2t] seconds (client-go: 5 min). */
  watchTimeoutSeconds?: number;
  /** A list page's deadline (ms). */
  requestTimeoutMs?: number;
  pageSize?: number;
  /** Objects kept at most; beyond, new ones are ignored and counted. */
  maxObjects?: number;
}

/** A watch ended: how. */
type WatchEnd = { kind: 'expired' } | { kind: 'closed' } | { kind: 'idle' } | { kind: 'stopped' } | { kind: 'error'; err: unknown };

/** A watch that delivered something, or lasted this long, was healthy: the next one starts without backoff. */
const PRODUCTIVE_MS = 5000;

const sleep = (ms: number, signal: AbortSignal): Promise<void> => new Promise((resolve) => {
  if (signal.aborted) return resolve();
  const t = setTimeout(done, ms);
  function done (): void {
    clearTimeout(t);
    signal.removeEventListener('abort', done);
    resolve();
  }
  signal.addEventListener('abort', done);
});

const isExpired = (status: number, reason: string): boolean => status === 410 || reason === 'Expired' || reason === 'Gone';

export class Reflector {
  readonly #o: Required<Omit<ReflectorOptions, 'labelSelector' | 'fieldSelector'>> & Pick<ReflectorOptions, 'labelSelector' | 'fieldSelector'>;
  readonly #stop = new AbortController();
  #objects = new Map<string, KubeObject>();
  #rv = '';
  #failures = 0;
  #endWatch: (() => void) | null = null;
  #run: Promise<void> | null = null;
  #synced!: () => void;
  /** Resolves after the first successful list. */
  readonly synced = new Promise<void>((resolve) => { this.#synced = resolve; });

  constructor (opts: ReflectorOptions) {
    this.#o = {
      stats: newReflectorStats(), backoffMinMs: 500, backoffMaxMs: 30_000, watchTimeoutSeconds: 300, requestTimeoutMs: 30_000,
      pageSize: 500, maxObjects: 16_384, ...opts
    };
  }

  get objects (): ReadonlyMap<string, KubeObject> {
    return this.#objects;
  }

  /** A list has succeeded: `objects` is the collection (else it is empty for want of an answer). */
  get listed (): boolean {
    return this.#listed;
  }

  get resourceVersion (): string {
    return this.#rv;
  }

  start (): this {
    this.#run ??= this.#loop();
    return this;
  }

  async stop (): Promise<void> {
    this.#stop.abort();
    this.#endWatch?.();
    await this.#run;
  }

  async #loop (): Promise<void> {
    const signal = this.#stop.signal;
    let watches = 0;
    while (!signal.aborted) {
      if (this.#rv === '') {
        try {
          await this.#list(signal);
        } catch (err) {
          if (signal.aborted) return;
          this.#o.stats.errors++;
          this.#o.log.warn({ path: this.#o.path, err: (err as Error).message }, 'kubernetes list failed; retrying');
          await sleep(this.#backoff(), signal);
          continue;
        }
        watches = 0;
      }
      if (watches++ > 0) this.#o.stats.watchRestarts++;
      const started = Date.now();
      let delivered = 0;
      const end = await this.#watch(signal, () => { delivered++; });
      if (end.kind === 'stopped' || signal.aborted) return;
      if (end.kind === 'expired') this.#rv = '';
      if (end.kind === 'error') {
        this.#o.stats.errors++;
        const e = end.err as { statusCode?: number; message?: string };
        // A watch refused with 410 (some servers answer so rather than with an ERROR event) relists too.
        if (e.statusCode === 410) this.#rv = '';
        this.#o.log.warn({ path: this.#o.path, err: e.message ?? String(end.err) }, 'kubernetes watch failed');
      }
      if (end.kind === 'idle') this.#o.log.warn({ path: this.#o.path }, 'kubernetes watch went silent; watching again');
      if (delivered > 0 || Date.now() - started >= PRODUCTIVE_MS) this.#failures = 0;
      else await sleep(this.#backoff(), signal);
    }
  }

  /** The next delay: min·2^failures, capped, with ±25 % jitter so that replicas do not retry in step. */
  #backoff (): number {
    const base = Math.min(this.#o.backoffMaxMs, this.#o.backoffMinMs * 2 ** Math.min(this.#failures++, 20));
    return Math.round(base * (0.75 + Math.random() * 0.5));
  }

  async #list (signal: AbortSignal): Promise<void> {
    const items = new Map<string, KubeObject>();
    let cont = '';
    let rv = '';
    let overflow = 0;
    let restarts = 0;
    for (;;) {
      const page = await getJson(this.#o.kc, this.#o.path, {
        labelSelector: this.#o.labelSelector, fieldSelector: this.#o.fieldSelector, limit: String(this.#o.pageSize), continue: cont || undefined
      }, this.#o.requestTimeoutMs, signal).catch((err: unknown) => {
        // The continue token expired between pages (its snapshot left the history): start over, a few times.
        if (err instanceof KubeApiError && isExpired(err.apiStatus, err.reason) && cont !== '' && restarts++ < 3) return null;
        throw err;
      }) as { items?: KubeObject[]; metadata?: { resourceVersion?: string; continue?: string } } | null;
      if (page === null) {
        items.clear();
        overflow = 0;
        cont = '';
        continue;
      }
      for (const o of page.items ?? []) {
        const name = o.metadata?.name;
        if (name === undefined) continue;
        if (items.size >= this.#o.maxObjects && !items.has(name)) overflow++;
        else items.set(name, o);
      }
      rv = page.metadata?.resourceVersion ?? '';
      cont = page.metadata?.continue ?? '';
      if (cont === '') break;
    }
    if (rv === '') throw new Error(`list of ${this.#o.path} carried no resourceVersion`);
    this.#o.stats.lists++;
    if (this.#listed) this.#o.stats.relists++;
    this.#listed = true;
    this.#o.stats.overflow += overflow;
    if (overflow > 0) this.#o.log.warn({ path: this.#o.path, kept: items.size, ignored: overflow }, 'more objects than maxObjects: the extras are ignored');
    this.#objects = items;
    this.#rv = rv;
    this.#o.onChange(this.#objects);
    this.#synced();
  }

  #listed = false;

  #watch (signal: AbortSignal, onEvent: () => void): Promise<WatchEnd> {
    const timeout = this.#o.watchTimeoutSeconds * (1 + Math.random());
    // The server ends the watch at `timeout`; silence well past it means the connection is dead (a half-open
    // socket after a node or API-server crash) or the answer never came.
    const idleMs = (timeout + Math.min(30, this.#o.watchTimeoutSeconds)) * 1000;
    return new Promise<WatchEnd>((resolve) => {
      let settled = false;
      let controller: AbortController | null = null;
      let idle: NodeJS.Timeout | undefined;
      const finish = (end: WatchEnd): void => {
        if (settled) return;
        settled = true;
        clearTimeout(idle);
        this.#endWatch = null;
        controller?.abort();
        resolve(end);
      };
      const arm = (): void => {
        clearTimeout(idle);
        idle = setTimeout(() => finish({ kind: 'idle' }), idleMs);
      };
      this.#endWatch = () => finish({ kind: 'stopped' });
      if (signal.aborted) return finish({ kind: 'stopped' });
      arm();
      const query: Record<string, string | boolean | number | undefined> = {
        resourceVersion: this.#rv, allowWatchBookmarks: true, timeoutSeconds: Math.round(timeout),
        labelSelector: this.#o.labelSelector || undefined, fieldSelector: this.#o.fieldSelector || undefined
      };
      new Watch(this.#o.kc).watch(this.#o.path, query, (type: string, obj: KubeObject) => {
        if (settled) return;
        arm();
        // An ERROR event is not progress: a server that answers every watch with one must meet the backoff.
        if (type !== 'ERROR') onEvent();
        this.#event(type, obj, finish);
      }, (err: unknown) => finish(err === null || err === undefined ? { kind: 'closed' } : isAbort(err) ? { kind: 'closed' } : { kind: 'error', err }))
        .then((c) => {
          controller = c;
          if (settled) c.abort();
        }, (err: unknown) => finish({ kind: 'error', err }));
    });
  }

  #event (type: string, obj: KubeObject, finish: (end: WatchEnd) => void): void {
    const rv = obj?.metadata?.resourceVersion;
    const name = obj?.metadata?.name;
    switch (type) {
      case 'ADDED':
      case 'MODIFIED':
        if (name === undefined) return;
        if (!this.#objects.has(name) && this.#objects.size >= this.#o.maxObjects) this.#o.stats.overflow++;
        else this.#objects.set(name, obj);
        if (rv) this.#rv = rv;
        this.#o.onChange(this.#objects);
        return;
      case 'DELETED':
        if (name !== undefined) this.#objects.delete(name);
        if (rv) this.#rv = rv;
        this.#o.onChange(this.#objects);
        return;
      case 'BOOKMARK':
        if (rv) this.#rv = rv;
        return;
      case 'ERROR': {
        const st = obj as { code?: number; reason?: string; message?: string };
        if (isExpired(st.code ?? 0, st.reason ?? '')) {
          this.#o.log.info({ path: this.#o.path, resourceVersion: this.#rv, message: st.message }, 'watch expired (410 Gone): relisting');
          return finish({ kind: 'expired' });
        }
        return finish({ kind: 'error', err: new KubeApiError(st.code ?? 0, st.reason ?? '', `watch ERROR event: ${st.code} ${st.message ?? ''}`) });
      }
      default:
    }
  }
}

function isAbort (err: unknown): boolean {
  return (err as { name?: string }).name === 'AbortError';
}
