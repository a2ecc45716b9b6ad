// The young generation of the threads that carry requests. A request's objects die young, so V8's scavenges cost
// in proportion to how often they run: with its default young generation (16 MB a semi-space) a data-plane thread
// scavenges every few hundred requests, ~10% of its time at load on two cores (bench/RESULTS.md, session 19), and
// `--max-semi-space-size=64` (what `npm start` and the Docker image give every thread) runs them a quarter as
// often. A gateway started without that flag (`node dist/src/cli/ear.js serve`) still gets it in the threads it
// starts, through the documented per-worker limit; the main thread's own needs the flag at launch. A process told
// its young generation (the flag, or --max-young-generation-size) keeps what it was told, in every thread.

/** The semi-space, in MB, of a data-plane thread's young generation when the process names none. */
export const REQUEST_THREAD_SEMI_SPACE_MB = 64;

/** Whether the process's node flags (command line or NODE_OPTIONS) size V8's young generation. */
export function youngGenerationFlagged (execArgv: readonly string[] = process.execArgv, nodeOptions: string = process.env.NODE_OPTIONS ?? ''): boolean {
  const named = (s: string): boolean => /--max[-_]semi[-_]space[-_]size|--max[-_]young[-_]generation[-_]size|--min[-_]semi[-_]space[-_]size/.test(s);
  return execArgv.some(named) || named(nodeOptions);
}

/**
 * Worker `resourceLimits` for a thread that carries requests: a young generation of REQUEST_THREAD_SEMI_SPACE_MB a
 * semi-space (V8 sizes the young generation as three semi-spaces), or none when the process's flags size it.
 */
export function requestThreadLimits (flagged: boolean = youngGenerationFlagged()): { maxYoungGenerationSizeMb: number } | undefined {
  return flagged ? undefined : { maxYoungGenerationSizeMb: 3 * REQUEST_THREAD_SEMI_SPACE_MB };
}
