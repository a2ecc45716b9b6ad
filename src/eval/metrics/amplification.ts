// Wall-clock amplification: the run's makespan over the makespan of an ideal run in which every request takes
// its isolated service time (an idle engine already holding the session's whole prefix). The driver measures
// the isolated times; the ideal makespan replays the workload's dependencies (closed-loop think times,
// sub-agent launches and joins, arrivals; open-loop timestamps) with them.
import { replay, type ServiceTime } from '../workloads/replay.js';
import type { Workload } from '../workloads/types.js';

export function idealMakespan (workload: Workload, isolated: ServiceTime): number {
  return replay(workload, isolated).makespan;
}

/** ≥ 1 in a sane run; null when the ideal is 0 (nothing ran). */
export function amplification (makespan: number, ideal: number): number | null {
  return ideal > 0 ? makespan / ideal : null;
}
