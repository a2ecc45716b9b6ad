// Drives a workload's requests in time, on any clock: the closed loop (turn k+1 sent its think time after
// turn k's response ends, sub-agents launched off their parents and joined where the parent waits for them,
// Poisson starts or N root sessions kept running) and the open loop (each request at its time). What a request
// costs is not decided here: `send` starts it and calls `done` when its response has ended. The replay of
// fixed service times, the discrete-event driver and the end-to-end driver all run through this one loop.
import type { Arrival, OpenLoopWorkload, PromptSpec, Session, Workload } from './types.js';

/** A clock that runs `fn` at time `t` (≥ now): a virtual event queue, the DES host, or real timers. */
export interface Scheduler {
  at (t: number, fn: (t: number) => void): void;
}

/** One request as the workload issues it. */
export interface Dispatch {
  readonly sessionId: string;
  /** The root of the session's tree (itself for a root session). */
  readonly rootSessionId: string;
  readonly parentId: string | null;
  readonly turn: number;
  readonly spec: PromptSpec;
  readonly outputTokens: number;
  /** Send time. */
  readonly at: number;
  /**
   * Whether the session's next turn follows this one after a tool delay. The workloads do not say which turns
   * end in tool calls; a turn followed by a tool delay is taken as one (the lab's retention reads it).
   */
  readonly toolCall: boolean;
}

/** Starts `d` at `d.at`; must call `done(tEnd)` once, when the response has ended (or the request failed). */
export type Send = (d: Dispatch, done: (tEnd: number) => void) => void;

export interface RunHooks {
  /** A root session and all of its sub-agents finished. */
  sessionDone?: (rootSessionId: string, start: number, end: number) => void;
}

export function runWorkload (w: Workload, sched: Scheduler, send: Send, hooks: RunHooks = {}): void {
  if (w.kind === 'open') runOpen(w, sched, send);
  else runClosed(w.sessions, w.arrival, sched, send, hooks);
}

function runOpen (w: OpenLoopWorkload, sched: Scheduler, send: Send): void {
  for (const r of w.requests) {
    sched.at(r.at, (t) => send({ sessionId: r.sessionId, rootSessionId: r.sessionId, parentId: null, turn: r.turn, spec: r, outputTokens: r.outputTokens, at: t, toolCall: false }, () => {}));
  }
}

function runClosed (roots: readonly Session[], arrival: Arrival, sched: Scheduler, send: Send, hooks: RunHooks): void {
  let nextRoot = 0;

  /** Runs one session; onDone gets the time its turns and all its sub-agents have finished. */
  const startSession = (s: Session, rootId: string, at: number, onDone: (t: number) => void): void => {
    let open = 1 + s.children.length;
    let lastEnd = at;
    const partDone = (t: number): void => {
      if (t > lastEnd) lastEnd = t;
      if (--open === 0) onDone(lastEnd);
    };
    // Turn k is ready once turn k−1 has ended and the sub-agents it joins have finished.
    const waits = s.turns.map((_, k) => (k > 0 ? 1 : 0));
    const readyAt = s.turns.map(() => at);
    for (const c of s.children) if (c.joinBeforeTurn !== null) waits[c.joinBeforeTurn]++;
    const arrive = (k: number, t: number): void => {
      if (t > readyAt[k]) readyAt[k] = t;
      if (--waits[k] === 0) sched.at(readyAt[k] + s.turns[k].thinkTime, (tSend) => issue(k, tSend));
    };
    const launch = (afterTurn: number, tEnd: number): void => {
      for (const c of s.children) {
        if (c.afterTurn !== afterTurn) continue;
        sched.at(tEnd + c.delay, (tStart) => startSession(c.session, rootId, tStart, (tc) => {
          if (c.joinBeforeTurn !== null) arrive(c.joinBeforeTurn, tc);
          partDone(tc);
        }));
      }
    };
    const issue = (k: number, tSend: number): void => {
      const turn = s.turns[k];
      let finished = false;
      send({ sessionId: s.id, rootSessionId: rootId, parentId: s.parentId, turn: k, spec: turn, outputTokens: turn.outputTokens, at: tSend, toolCall: k + 1 < s.turns.length }, (end) => {
        if (finished) throw new Error(`request ${s.id}/${k} reported done twice`);
        finished = true;
        launch(k, end);
        if (k + 1 < s.turns.length) arrive(k + 1, end);
        else partDone(end);
      });
    };
    launch(-1, at);
    if (s.turns.length === 0) partDone(at);
    else if (waits[0] === 0) issue(0, at);
  };
  const startRoot = (root: Session, t: number): void => {
    startSession(root, root.id, t, (tEnd) => {
      hooks.sessionDone?.(root.id, t, tEnd);
      if (arrival.mode === 'concurrency' && nextRoot < roots.length) {
        const next = roots[nextRoot++];
        sched.at(tEnd, (t2) => startRoot(next, t2));
      }
    });
  };

  if (arrival.mode === 'poisson') {
    for (const r of roots) sched.at(r.start, (t) => startRoot(r, t));
    nextRoot = roots.length;
  } else {
    for (; nextRoot < Math.min(arrival.n, roots.length); nextRoot++) {
      const r = roots[nextRoot];
      sched.at(0, (t) => startRoot(r, t));
    }
  }
}
