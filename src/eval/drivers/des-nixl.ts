// The NIXL export leg in the lab (the gateway's is nixl-connector.ts over HTTP): a one-token request with
// kvExport on the source engine; when it finishes, the blocks it holds are what the target's import pulls. The
// source keeps them held until the pull has read them (setup + bytes / bandwidth later), then they stay cached
// there, evictable. Used for request-path moves (des.ts) and proactive pre-warms (des-proactive.ts) alike.
import type { DesHost } from '../../sim/des.js';
import type { KvImport, SimRequest } from '../../sim/engine-types.js';
import { transferTime } from '../../engine-model/figures.js';
import type { ResolvedProfile } from '../../engine-model/profile.js';

export interface ExportLeg {
  /** The export finished holding blocks: what the target's request imports, the pull's modelled seconds, and the
   *  seconds the leg waited in the source's queue before its first step. */
  held (at: number, kvImport: KvImport, pullSeconds: number, waitedSeconds: number): void;
  /** The export failed or held nothing: no params, as vLLM without them. */
  failed (at: number): void;
}

/** Submits `req` (its prompt the target's) to engine `from` at `at` as an export leg. */
export function exportLeg (des: DesHost, profile: ResolvedProfile, from: number, req: Omit<SimRequest, 'kvExport' | 'kvImport' | 'maxTokens'>, at: number, leg: ExportLeg): void {
  des.submit(from, { ...req, maxTokens: 1, kvExport: true }, at, {
    onFinish: (xt, out) => {
      const held = des.engines[from].heldBlocks(req.id);
      if (held === null) return leg.failed(xt);
      const pull = transferTime(profile, held.length);
      des.abort(from, req.id, xt + pull);
      const waited = out.metrics === undefined ? 0 : out.metrics.firstScheduledTime - out.metrics.arrivalTime;
      leg.held(xt, { prefixTokenIds: held, sourceEngineId: `engine-${from}` }, pull, waited);
    },
    onError: (xt) => leg.failed(xt)
  });
}
