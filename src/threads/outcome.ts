// How a failure crosses a thread boundary. Structured clone keeps an Error's message but drops its class and its
// code, so a thread answers with data, {code, message}, and the caller rebuilds an error of its own from it.

/** An error as it travels between threads. */
export interface WireError {
  code: string;
  message: string;
}

/** A thread's answer to one request: its value, or why there is none. */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: WireError };

/**
 * An error a thread answers a request with on purpose (the caller's mistake, not the thread's bug), and the
 * error a caller rebuilds from a WireError when its protocol names no class of its own.
 */
export class ThreadError extends Error {
  readonly code: string;

  constructor (code: string, message: string) {
    super(message);
    this.name = 'ThreadError';
    this.code = code;
  }
}

/** The wire form of anything thrown: its string code if it has one, else EAR_ERR_INTERNAL. */
export function toWireError (err: unknown): WireError {
  const code = (err as { code?: unknown } | null)?.code;
  return { code: typeof code === 'string' ? code : 'EAR_ERR_INTERNAL', message: err instanceof Error ? err.message : String(err) };
}

/** The value of an outcome, or the error `toError` rebuilds from its failure, thrown. */
export function unwrap<T> (o: Outcome<T>, toError: (e: WireError) => Error = threadError): T {
  if (o.ok) return o.value;
  throw toError(o.error);
}

export function threadError (e: WireError): Error {
  return new ThreadError(e.code, e.message);
}
