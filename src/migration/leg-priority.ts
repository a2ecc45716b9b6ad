// The priority a KV leg carries (a migration's export, a pre-warm, a P/D prefill leg): the most urgent value of
// its engine when the engine orders by priority and the API takes the field (src/core/engine-priority.ts,
// src/dialects/dialect.ts), else none.
import { priorityToSend } from '../core/engine-priority.js';
import { takesEnginePriority } from '../dialects/dialect.js';
import type { TransferPeer } from './connector.js';

export function legPriority (peer: Pick<TransferPeer, 'priority'>, path: string): number | null {
  return priorityToSend(peer.priority ?? null, takesEnginePriority(path), 'urgent');
}
