// Dispatch coupling (issue 12 item 5): a policy's mean turn service time W′ against its amplification, with
// the curve of the design paper's Little's-law argument, amplification ≈ 1 / (1 − ρ), ρ = Λ·N·W′ / K.
//
//   Λ  session arrival rate, sessions/s: root sessions (a session with its sub-agents is one program), from
//      the first send of each root: (roots − 1) / (last root start − first root start), the rate estimate of a
//      Poisson process between its first and last arrival (or given as a collector option).
//   N  mean turns per session: requests sent / root sessions (a sub-agent's turns count for its root, since
//      they load the fleet as the root's own turns do).
//   W′ mean turn service time, s: mean request E2E (sent → last token) over completed requests. It is the
//      time a turn occupies the fleet as the policy dispatches it, queueing included, not the isolated time.
//   K  engines.
//
// Why the division by K: Λ·N is the fleet's turn arrival rate, so by Little's law Λ·N·W′ is the mean number of
// turns in service in the whole fleet at once. The plain formula would diverge when one turn is in service
// fleet-wide, which is no overload for K engines; a policy spreads the Λ·N turns/s over K engines, each seeing
// Λ·N/K, so the per-engine occupancy ρ = Λ·N·W′/K is the figure that nears 1 as the engines saturate (an
// engine in this workload is prefill-bound: a ~33k-token prompt holds its token budget for many steps, so
// about one turn at a time is what it serves well). No normalisation by the tool gap is needed: Little's law
// over turns counts a session only while a turn of it is in service, and the gaps occupy no engine. ρ ≥ 1 can
// be measured (batching lets an engine hold more than one turn); the curve has no value there.

export interface CouplingSummary {
  /** W′, seconds: mean E2E over completed requests (0 when none completed). */
  meanTurnServiceTime: number;
  /** Λ, root sessions per second; null with fewer than two root sessions spread in time and no option. */
  sessionArrivalRate: number | null;
  /** N, requests sent per root session; null before any request. */
  meanTurnsPerSession: number | null;
  /** K */
  engines: number;
  /** ρ = Λ·N·W′ / K; null when Λ or N is. */
  occupancy: number | null;
  /** 1 / (1 − ρ) for ρ < 1, else null. */
  predictedAmplification: number | null;
}

/** 1 / (1 − Λ·N·W′/K); null at and past the pole. */
export function couplingAmplification (lambda: number, turns: number, w: number, engines: number): number | null {
  const rho = (lambda * turns * w) / engines;
  return rho < 1 ? 1 / (1 - rho) : null;
}

/** The W′ at which the curve diverges (ρ = 1). */
export function couplingPole (lambda: number, turns: number, engines: number): number {
  return engines / (lambda * turns);
}

export function couplingOf (o: { meanTurnServiceTime: number; sessionArrivalRate: number | null; meanTurnsPerSession: number | null; engines: number }): CouplingSummary {
  const { meanTurnServiceTime: w, sessionArrivalRate: lambda, meanTurnsPerSession: n, engines } = o;
  const occupancy = lambda === null || n === null ? null : (lambda * n * w) / engines;
  return {
    meanTurnServiceTime: w, sessionArrivalRate: lambda, meanTurnsPerSession: n, engines, occupancy,
    predictedAmplification: lambda === null || n === null ? null : couplingAmplification(lambda, n, w, engines),
  };
}

/** Λ from the start times of the root sessions (any order: e2e's sends may interleave slightly). */
export function arrivalRate (starts: readonly number[]): number | null {
  if (starts.length < 2) return null;
  let lo = Infinity, hi = -Infinity;
  for (const t of starts) { if (t < lo) lo = t; if (t > hi) hi = t; }
  const span = hi - lo;
  return span > 0 ? (starts.length - 1) / span : null;
}
