// program-ttl: the idea of vLLM router PR #286 (RFC vllm-project/router#285, "Program-level Progress-TTL
// scheduling") as a baseline: an agent's LLM → tool → LLM run is one program bound to one engine, and a paused
// program (in its tool gap) keeps its claim on that engine's KV for a TTL, by admission alone: new programs are
// bound where capacity remains after the active programs and the paused ones, and nothing ever migrates.
// Here:
// - a session bound to a candidate goes to it ('program-home'), however loaded (no migration, no KV transfer);
// - a new session, or one whose engine is gone, is bound to the candidate with the most KV room after running
//   work, pending prefill and retained prefixes (kv-room.ts; the RFC's ReasoningTokenBalance binding: "the
//   greatest capacity remaining after active Programs plus paused reasoning Programs"), ties by the placement
//   rotation ('program-new');
// - the TTL is the host's retention (retention.ts): a tool-call turn's prefix is kept for the session's learnt
//   gap, or a client's hint, and counted as taken when new sessions are bound.
// Left out of the PR: its RequestPool (it holds a program's request in the router while no engine has room and
// resumes paused programs by MRU order); with the host's admission scheduler that job is the scheduler's, and a
// stock run here has none. Unknown capacity (0) counts as unbounded room, so every tie goes to the rotation.
import type { Policy } from '../policy.js';
import { argmin, findPod, placementRotation } from './pick.js';
import { kvRoom } from './kv-room.js';
import { readKnobs } from './knobs.js';

export function createProgramTtl (config: Readonly<Record<string, unknown>> = {}): Policy {
  readKnobs('program-ttl', config, {}, {});
  return {
    name: 'program-ttl',
    keepsRetained: true,
    route (req, cluster) {
      const s = req.sessionKey === null ? null : cluster.sessions.get(req.sessionKey);
      if (s !== null && s.host >= 0 && findPod(cluster, s.host) !== undefined) return { pod: s.host, reason: 'program-home' };
      return { pod: argmin(cluster.pods, (p) => -kvRoom(p, cluster), placementRotation(cluster)).index, reason: 'program-new' };
    }
  };
}
