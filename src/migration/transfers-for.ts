// KvTransfers from the gateway's settings (kvCostProfile, kvConnectors, kvConnector): one construction for the
// request path (server.ts) and the migration thread, so both choose connectors by the same costs.
import { loadProfile } from '../engine-model/profile.js';
import { TransferCosts, type TransferMode } from './cost.js';
import { KvTransfers } from './transfer.js';

export interface KvTransferSettings {
  /** Engine profile whose figures the cost estimate uses. */
  kvCostProfile: string;
  /** Connectors the fleet offers (recompute is always added). */
  kvConnectors: readonly TransferMode[];
  /** `auto`: the cheapest offered per transfer; else always this one. */
  kvConnector: TransferMode | 'auto';
}

export function kvTransfersFor (s: KvTransferSettings): KvTransfers {
  return new KvTransfers(new TransferCosts(loadProfile(s.kvCostProfile), s.kvConnectors, s.kvConnector === 'auto' ? null : s.kvConnector));
}
