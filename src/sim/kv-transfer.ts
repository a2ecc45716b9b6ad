// kv_transfer_params as vLLM's NixlConnector reads and returns them (kv-transfer.md §1–2), and the simulator's
// side channel that stands in for the NIXL read: the importer POSTs to the exporter's HTTP port
// (remote_host:remote_port) at KV_PULL_PATH, gets the held prompt blocks' token ids, and the hold is released.
// The engine core keeps the hold itself and frees it on its own timeout (VLLM_NIXL_ABORT_REQUEST_TIMEOUT).

export const KV_PULL_PATH = '/ear/v1/kv/pull';

export interface ImportParams {
  remoteBlockIds: number[][];
  remoteEngineId: string;
  remoteRequestId: string;
  remoteHost: string;
  remotePort: number;
}

export type KvTransferIntent =
  | { kind: 'none' }
  | { kind: 'export' }
  | { kind: 'import'; params: ImportParams }
  /** do_remote_prefill with missing or malformed fields: vLLM logs "Got invalid KVTransferParams" and computes locally. */
  | { kind: 'invalid'; reason: string };

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);

function blockIds (v: unknown): number[][] | null {
  if (!Array.isArray(v)) return null;
  // Older vLLM sent one flat list; newer one list per KV-cache group.
  if (v.every(isInt)) return [v as number[]];
  if (v.every((g) => Array.isArray(g) && g.every(isInt))) return v as number[][];
  return null;
}

export function classifyKvTransferParams (p: Record<string, unknown> | null): KvTransferIntent {
  if (p === null) return { kind: 'none' };
  if (p.do_remote_decode === true) return { kind: 'export' };
  if (p.do_remote_prefill !== true) return { kind: 'none' };
  const ids = blockIds(p.remote_block_ids);
  if (ids === null) return { kind: 'invalid', reason: 'remote_block_ids' };
  if (typeof p.remote_engine_id !== 'string') return { kind: 'invalid', reason: 'remote_engine_id' };
  if (typeof p.remote_request_id !== 'string') return { kind: 'invalid', reason: 'remote_request_id' };
  if (typeof p.remote_host !== 'string' || p.remote_host === '') return { kind: 'invalid', reason: 'remote_host' };
  const port = typeof p.remote_port === 'string' ? Number(p.remote_port) : p.remote_port;
  if (!isInt(port) || port < 1 || port > 65535) return { kind: 'invalid', reason: 'remote_port' };
  return {
    kind: 'import',
    params: { remoteBlockIds: ids, remoteEngineId: p.remote_engine_id, remoteRequestId: p.remote_request_id, remoteHost: p.remote_host, remotePort: port }
  };
}

/** What an export request's response carries (the classic NixlConnector shape). */
export function exportParams (blockIdsHeld: number[], engineId: string, requestId: string, host: string, port: number): Record<string, unknown> {
  return {
    do_remote_prefill: true,
    do_remote_decode: false,
    remote_block_ids: [blockIdsHeld],
    remote_engine_id: engineId,
    remote_request_id: requestId,
    remote_host: host,
    remote_port: port,
    tp_size: 1
  };
}

export interface PulledBlocks {
  engineId: string;
  blockSize: number;
  tokenIds: number[];
}

/** The importer's side of the channel; null when the source cannot serve it (the caller computes locally). */
export async function pullBlocks (p: ImportParams, timeoutMs: number): Promise<PulledBlocks | { error: string }> {
  const host = p.remoteHost.includes(':') && !p.remoteHost.startsWith('[') ? `[${p.remoteHost}]` : p.remoteHost;
  try {
    const res = await fetch(`http://${host}:${p.remotePort}${KV_PULL_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ remote_engine_id: p.remoteEngineId, remote_request_id: p.remoteRequestId, remote_block_ids: p.remoteBlockIds }),
      signal: AbortSignal.timeout(timeoutMs)
    });
    const body = await res.json() as Record<string, unknown>;
    if (res.status !== 200) return { error: `source answered ${res.status}: ${JSON.stringify(body).slice(0, 200)}` };
    const tokenIds = body.token_ids;
    if (typeof body.engine_id !== 'string' || !isInt(body.block_size) || !Array.isArray(tokenIds) || !tokenIds.every(isInt)) {
      return { error: 'source sent a malformed pull answer' };
    }
    return { engineId: body.engine_id, blockSize: body.block_size, tokenIds: tokenIds as number[] };
  } catch (err) {
    return { error: (err as Error).message };
  }
}
