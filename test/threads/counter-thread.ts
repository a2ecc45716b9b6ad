// A thread for thread-rpc.test.ts: a counter that speaks CounterProtocol over src/threads/.
import { parentPort, workerData } from 'node:worker_threads';
import { eventSender, serveThread } from '../../src/threads/thread-service.js';
import { ThreadError } from '../../src/threads/outcome.js';

export interface CounterProtocol {
  data: { start: number };
  call:
    | { type: 'read' }
    /** Answered with ERR_OUT_OF_RANGE when n is negative (a ThreadError: on purpose). */
    | { type: 'add'; n: number }
    /** Throws a plain Error: a bug in the thread. */
    | { type: 'bug' }
    /** Ends the thread before it answers. */
    | { type: 'exit' }
    | { type: 'stop' };
  answers: { read: number; add: number; bug: never; exit: never; stop: number };
  note: { type: 'set'; n: number };
  event: { type: 'bug'; message: string; in: string };
}

const port = parentPort!;
const emit = eventSender<CounterProtocol>(port);
let count = (workerData as CounterProtocol['data']).start;
serveThread<CounterProtocol>(port, {
  calls: {
    read: () => count,
    add (m) {
      if (m.n < 0) throw new ThreadError('ERR_OUT_OF_RANGE', `n must be at least 0, got ${m.n}`);
      return (count += m.n);
    },
    bug () {
      throw new Error('a bug');
    },
    exit: () => process.exit(0),
    stop: () => count
  },
  notes: {
    set (m) {
      count = m.n;
    }
  },
  closesOn: 'stop',
  onError: (err, type) => emit({ type: 'bug', message: (err as Error).message, in: type })
});
