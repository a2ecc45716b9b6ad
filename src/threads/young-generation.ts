// The young generation of the threads that carry requests. A request's objects die young unless a scavenge finds them
// still in flight: with V8's default young generation (16 MB a semi-space) a data-plane thread at load scavenged
// every ~50 ms, found the requests in flight at two scavenges in a row and moved them to the old generation (3–5 ms a
// scavenge, then mark-compacts to clear them); at 64 MB a semi-space, what `npm start` and the Docker image give every
// thread (`--max-semi-space-size=64`), a scavenge moves nothing and takes ~1 ms (bench/RESULTS.md, session 19). A
// gateway started without that flag (`node dist/src/cli/ear.js serve`) still gets it in its data-plane threads,
// through the documented per-worker limit; the main thread's own needs the flag at launch. A process told its young
// generation (those flags, --min-semi-space-size or --max-young-generation-size) keeps what it was told, in every thread.

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
