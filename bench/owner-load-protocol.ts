// What bench/owner-ceiling.ts and its load generators (bench/owner-load-thread.ts) say to each other, on a
// BroadcastChannel of this name.
export const CHANNEL = 'ear-owner-ceiling';

/** What the generators send (the `go` message). */
export interface LoadShape {
  inflight: number;
  model: string;
  /** 0: no session and no block keys (a short chat); else sessions drawn from this many, their turns with keys. */
  sessions: number;
  /** Block keys of a session's first turn; each later turn adds `growBlocks`, and the session starts over at `maxBlocks`. */
  firstBlocks: number;
  growBlocks: number;
  maxBlocks: number;
}

export type Control = { t: 'go'; shape: LoadShape } | { t: 'mark'; id: number } | { t: 'halt' };

export interface Counts {
  t: 'counts';
  id: number;
  thread: number;
  /** This generator's start (a thread the owner started again counts from 0 and sends nothing: its marks differ). */
  started: number;
  finished: number;
  queued: number;
  refused: number;
  /** Batches received from the owner, and sent to it. */
  batchesIn: number;
  batchesOut: number;
  /** Submits whose keys did not fit the key ring (sent in the message). */
  spilled: number;
}
