// Faults: a throw where EAR expected none (inside a response write, in a promise nobody awaits, out of a uWS
// callback). Each is reported here once, with the request id where one is known, and counted
// (ear_faults_total{where}); the process keeps serving. Exiting would let any client that finds such a throw end
// every other client's requests with it; the request that met the fault is ended by its own path (a 500 or a
// closed connection, its in-flight count and token charge released) before it is reported. docs/errors.md "Faults".
import { Gauge, type Registry } from 'prom-client';

/** Where a fault was met: a fixed set (a metric label). */
export type FaultSite = 'response-write' | 'upstream-attempt' | 'request' | 'unhandled-rejection' | 'uncaught-exception' | 'http-thread' | 'route-thread';

/** Where faults are written: `ear serve` and `ear epp` give their logger; the default is one JSON line on stderr. */
export type FaultSink = (err: unknown, where: FaultSite, requestId: string | null) => void;

const counts = new Map<FaultSite, number>();
let sink: FaultSink = (err, where, requestId) => {
  process.stderr.write(`${JSON.stringify({ level: 'error', where, requestId, err: describe(err), msg: 'unexpected fault; serving on' })}\n`);
};

/** The request id a fault carries, when the code that met it knew it (requestIdOf). */
const kRequestId = Symbol('ear.fault.requestId');

/** Marks `err` (when it is an object) with the request it was thrown for, so that a process handler can name it. */
export function tagRequest<T> (err: T, requestId: string): T {
  if (typeof err === 'object' && err !== null && !Object.isFrozen(err)) (err as Record<symbol, unknown>)[kRequestId] = requestId;
  return err;
}

export function requestIdOf (err: unknown): string | null {
  const id = typeof err === 'object' && err !== null ? (err as Record<symbol, unknown>)[kRequestId] : undefined;
  return typeof id === 'string' ? id : null;
}

/** Reports a fault (never throws: a sink that throws is dropped back to the default's line). */
export function reportFault (err: unknown, where: FaultSite, requestId: string | null = requestIdOf(err)): void {
  counts.set(where, (counts.get(where) ?? 0) + 1);
  try {
    sink(err, where, requestId);
  } catch {
    process.stderr.write(`${JSON.stringify({ level: 'error', where, requestId, err: describe(err) })}\n`);
  }
}

export function setFaultSink (s: FaultSink): void {
  sink = s;
}

/** Faults reported so far at `where` (tests, metrics). */
export function faultCount (where: FaultSite): number {
  return counts.get(where) ?? 0;
}

/** ear_faults_total{where}, read when scraped. */
export function registerFaultMetrics (registry: Registry): void {
  new Gauge({
    name: 'ear_faults_total',
    help: 'Throws EAR expected none of (a response write, a promise nobody awaited, an uncaught exception), by where they were met; each was logged with its request id where known, and the process kept serving.',
    labelNames: ['where'],
    registers: [registry],
    collect () { for (const [where, n] of counts) this.set({ where }, n); }
  });
}

/**
 * Logs every unhandled rejection and uncaught exception as a fault and keeps serving (see the head of this file).
 * Installed once per process by `ear serve` and `ear epp`.
 */
export function installProcessFaultHandlers (): void {
  process.on('unhandledRejection', (reason) => reportFault(reason, 'unhandled-rejection'));
  process.on('uncaughtException', (err) => reportFault(err, 'uncaught-exception'));
}

function describe (err: unknown): string {
  if (err instanceof Error) return err.stack ?? `${err.name}: ${err.message}`;
  try {
    return String(err);
  } catch {
    return 'a value that cannot be shown';
  }
}
