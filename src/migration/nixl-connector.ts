// vLLM's NixlConnector two-step protocol, driven as llm-d's nixlv2 connector and vLLM's toy proxy drive it
// (kv-transfer.md §1, §6a): the export leg on the source is the client's request with
// kv_transfer_params {do_remote_decode: true, …null}, stream false and max_tokens 1; the source computes what
// it lacks, holds the blocks and answers with the params an importer needs; the target gets the client's own
// body with those params verbatim (and pulls the blocks it lacks before prefilling the rest).
import type { KvTransferConnector, LegSignal, TransferPeer, TransferPlan } from './connector.js';
import { legPriority } from './leg-priority.js';

/** The export leg's kv_transfer_params, exactly as llm-d and the vLLM proxies send them. */
export const EXPORT_PARAMS: Readonly<Record<string, unknown>> = Object.freeze({
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null
});

/** Fields a one-token, non-streaming prefill must not carry (the toy proxy pops the min_* ones for P). */
const EXPORT_DROPPED = ['stream_options', 'min_tokens', 'min_completion_tokens'];

/** Loopback names an engine reports when VLLM_NIXL_SIDE_CHANNEL_HOST was left at its default. */
const LOOPBACK = new Set(['localhost', '127.0.0.1', '::1', '0.0.0.0', '']);

/**
 * The export leg's body: the client's body, one token, not streamed, holding its KV for an importer; with
 * `priority` (a priority engine: the most urgent value) it passes the source's waiting queue.
 */
export function exportBody (body: Readonly<Record<string, unknown>>, priority: number | null = null): Record<string, unknown> {
  const b: Record<string, unknown> = { ...body };
  for (const k of EXPORT_DROPPED) delete b[k];
  delete b.priority;
  if (priority !== null) b.priority = priority;
  b.kv_transfer_params = { ...EXPORT_PARAMS };
  b.stream = false;
  b.max_tokens = 1;
  if ('max_completion_tokens' in b) b.max_completion_tokens = 1;
  // A one-token leg that samples EOS finishes "stopped", and older vLLM then returns no params (§1b gotchas).
  b.ignore_eos = true;
  return b;
}

export class NixlConnector implements KvTransferConnector {
  readonly mode = 'nixl' as const;

  async prepare (body: Readonly<Record<string, unknown>>, path: string, src: TransferPeer, requestId: string, signal: LegSignal): Promise<TransferPlan> {
    const t0 = performance.now();
    const a = await src.post(path, Buffer.from(JSON.stringify(exportBody(body, legPriority(src, path)))), requestId, signal);
    const exportSeconds = (performance.now() - t0) / 1000;
    if (a.status === null) return { mode: 'nixl', exportSeconds, failure: `the export leg on ${src.id} got no answer` };
    if (a.status < 200 || a.status > 299) return { mode: 'nixl', exportSeconds, failure: `the export leg on ${src.id} answered ${a.status}` };
    let params: unknown;
    try {
      params = (JSON.parse(a.body.toString('utf8')) as { kv_transfer_params?: unknown }).kv_transfer_params;
    } catch {
      return { mode: 'nixl', exportSeconds, failure: `the export leg on ${src.id} answered with a body that is not JSON` };
    }
    if (typeof params !== 'object' || params === null || Array.isArray(params)) {
      // No NIXL connector on the source, or the leg did not end length-capped: nothing is held.
      return { mode: 'nixl', exportSeconds, failure: `${src.id} returned no kv_transfer_params` };
    }
    const p = { ...(params as Record<string, unknown>) };
    // vLLM's side channel defaults to localhost; the pod's address is the one the target can reach (AIBrix does the same).
    if (typeof p.remote_host !== 'string' || LOOPBACK.has(p.remote_host)) p.remote_host = src.host;
    return { mode: 'nixl', kvTransferParams: p, exportSeconds };
  }

  decorate (body: Readonly<Record<string, unknown>>, plan: TransferPlan): Record<string, unknown> | null {
    if (plan.kvTransferParams === undefined) return null;
    return { ...body, kv_transfer_params: plan.kvTransferParams };
  }
}
