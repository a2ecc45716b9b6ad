// The thread's side of a Protocol (thread-client.ts is the parent's): handlers for its requests and notes, run
// one message at a time in arrival order, so a request sees every earlier message applied. A handler that
// throws answers its request with the error as data ({code, message}, outcome.ts); unless it threw a
// ThreadError (an answer on purpose) the service's onError hears of it too.
import type { MessagePort } from 'node:worker_threads';
import { ThreadError, toWireError } from './outcome.js';
import type { Answer, FromThread, Protocol, ToThread } from './protocol.js';

export type CallHandlers<P extends Protocol> = {
  [T in P['call']['type']]: (call: Extract<P['call'], { type: T }>) => Answer<P, T> | Promise<Answer<P, T>>
};

export type NoteHandlers<P extends Protocol> = {
  [T in P['note']['type']]: (note: Extract<P['note'], { type: T }>) => void | Promise<void>
};

export interface ThreadService<P extends Protocol> {
  calls: CallHandlers<P>;
  notes: NoteHandlers<P>;
  /** Once this request is answered the port closes, and the thread ends when its other handles have. */
  closesOn: P['call']['type'];
  /**
   * A handler threw something other than a ThreadError: a bug in the thread, or a resource that failed. Must not
   * throw itself (the messages behind would wait forever); to end the thread, throw from a later turn (setImmediate).
   */
  onError: (err: unknown, type: string) => void;
}

export function serveThread<P extends Protocol> (port: MessagePort, service: ThreadService<P>): void {
  let queue: Promise<void> = Promise.resolve();
  port.on('message', (m: ToThread<P>) => {
    queue = queue.then(() => handle(m));
  });

  async function handle (m: ToThread<P>): Promise<void> {
    const isCall = 'id' in m;
    const msg = isCall ? m.call : m.note;
    const handlers = (isCall ? service.calls : service.notes) as Record<string, (msg: unknown) => unknown>;
    try {
      const value = await handlers[msg.type](msg);
      if (isCall) port.postMessage({ id: m.id, ok: true, value } satisfies FromThread<P>);
    } catch (err) {
      if (isCall) port.postMessage({ id: m.id, ok: false, error: toWireError(err) } satisfies FromThread<P>);
      if (!(err instanceof ThreadError)) service.onError(err, msg.type);
    }
    if (isCall && msg.type === service.closesOn) port.close();
  }
}

/** How the thread posts its events. */
export function eventSender<P extends Protocol> (port: MessagePort): (e: P['event']) => void {
  return (e) => port.postMessage({ event: e } satisfies FromThread<P>);
}
