// Dispatch coupling (issue 12 item 5): a policy's mean turn service time W′ against its amplification, with
// the curve of the design paper's Little's-law argument, amplification ≈ 1 / (1 − x), x = Λ·N·W′ / (Λ·N·(W′+G)).
//
//   Λ  session arrival rate, sessions/s: root sessions (a session with its sub-agents is one program), from
//      the first send of each root: (roots − 1) / (last root start − first root start), the rate estimate of a
//      Poisson process between its first and last arrival (or given as a collector option).
//   N  mean turns per session: requests sent / root sessions (a sub-agent's turns count for its root, since
//      they load the fleet as the root's own turns do).
//   W′ mean turn service time, s: mean request E2E (sent → last token) over completed requests: the time a turn
//      takes as the policy dispatches it, queueing included, not its isolated time.
//   G  mean tool gap, s: a response's end to the same session's next send (the closed loop's think time), over
//      the turns that follow one (or given as a collector option).
//
// The argument: by Little's law Λ·N·W′ is the mean number of turns in service in the fleet, and Λ·N·(W′ + G)
// the mean number of sessions alive (each cycles through N turns of service plus gap). Their ratio x is the
// share of its life a session spends in service, and a session's completion time over its gaps alone is
// 1 / (1 − x): it diverges as service crowds out everything else (x → 1). That is the session slowdown
// against an ideal whose turns take no time, from means over turns. The measured slowdown differs two ways:
// its ideal has isolated turn times W₀ > 0 (lowering it by about (W₀ + G) / G), and it is a mean over sessions
// of ratios, in which a short session whose one turn queued long weighs as much as a long one (raising it: a
// 60 s run at 0.5 sessions/s on 4 engines measured 5.1–6.0 against a curve of 4.1–5.7).
//
// Why the plain 1 / (1 − Λ·N·W′) needs normalising: Λ·N·W′ is dimensionless but counts turns in service
// fleet-wide, so "1" (one turn in service somewhere) marks no limit at all: a 60 s agentic run at 0.5
// sessions/s on 4 engines read 70–100. Dividing by the engines (turns per engine) still read 17–25 where
// amplification was 1.05–1.84, because an engine batches many turns. Dividing by the sessions alive, Λ·N·(W′ + G), is the tool-gap
// normalisation that makes it a share in [0, 1). Λ and N then cancel: x = W′ / (W′ + G). The load enters
// through W′ (a policy that queues turns raises it), which is what the plot shows: policies along one curve,
// placed by how long their dispatch keeps a turn.
//
// `occupancy` = Λ·N·W′ / K (turns in service per engine) is reported as well: the load figure the curve is not.

export interface CouplingSummary {
  /** W′, seconds: mean E2E over completed requests (0 when none completed). */
  meanTurnServiceTime: number;
  /** Λ, root sessions per second; null with fewer than two root sessions spread in time and no option. */
  sessionArrivalRate: number | null;
  /** N, requests sent per root session; null before any request. */
  meanTurnsPerSession: number | null;
  /** G, seconds: mean gap between a response and the session's next send; null when no turn followed another. */
  meanToolGap: number | null;
  /** K */
  engines: number;
  /** x = Λ·N·W′ / (Λ·N·(W′ + G)) = W′ / (W′ + G): share of a session's life in service; null without G or Λ, N. */
  serviceShare: number | null;
  /** Λ·N·W′ / K: turns in service per engine (Little's law); null without Λ or N. */
  occupancy: number | null;
  /** 1 / (1 − x); null when x is. */
  predictedAmplification: number | null;
}

/** x = Λ·N·W′ / (Λ·N·(W′ + G)); null when undefined (no turns or no time). */
export function serviceShare (lambda: number, turns: number, w: number, gap: number): number | null {
  const alive = lambda * turns * (w + gap);
  return alive > 0 ? (lambda * turns * w) / alive : null;
}

/** The curve: 1 / (1 − x); null at x = 1 (no gap at all) or when x is undefined. */
export function couplingAmplification (lambda: number, turns: number, w: number, gap: number): number | null {
  const x = serviceShare(lambda, turns, w, gap);
  return x === null || x >= 1 ? null : 1 / (1 - x);
}

export function couplingOf (o: { meanTurnServiceTime: number; sessionArrivalRate: number | null; meanTurnsPerSession: number | null; meanToolGap: number | null; engines: number }): CouplingSummary {
  const { meanTurnServiceTime: w, sessionArrivalRate: lambda, meanTurnsPerSession: n, meanToolGap: gap, engines } = o;
  const known = lambda !== null && n !== null;
  const share = known && gap !== null ? serviceShare(lambda, n, w, gap) : null;
  return {
    meanTurnServiceTime: w, sessionArrivalRate: lambda, meanTurnsPerSession: n, meanToolGap: gap, engines,
    serviceShare: share, occupancy: known ? (lambda * n * w) / engines : null,
    predictedAmplification: share === null || share >= 1 ? null : 1 / (1 - share),
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
