// The one registry of policies, read by `ear serve --policy` and `ear eval --policies`.
import type { Policy, PolicyFactory } from '../policy.js';
import { createRandom } from './random.js';
import { createRoundRobin } from './round-robin.js';
import { createLeastRequest } from './least-request.js';
import { createLeastLoad } from './least-load.js';
import { createSticky } from './sticky.js';
import { createStickyHash } from './sticky-hash.js';
import { createPrefixCache } from './prefix-cache.js';
import { createScorer } from './scorer.js';
import { createKvLoad } from './kv-load.js';
import { createChwbl } from './chwbl.js';
import { createPreble } from './preble.js';
import { createVtcBasic } from './vtc-basic.js';
import { createEar, createEarProactive } from './ear.js';
import { createPdStatic } from './pd-static.js';
import { createProgramTtl } from './program-ttl.js';

const registry = new Map<string, PolicyFactory>([
  ['random', createRandom],
  ['round-robin', createRoundRobin],
  ['least-request', createLeastRequest],
  ['least-load', createLeastLoad],
  ['sticky', createSticky],
  ['sticky-hash', createStickyHash],
  ['prefix-cache', createPrefixCache],
  ['scorer', createScorer],
  ['kv-load', createKvLoad],
  ['chwbl', createChwbl],
  ['preble', createPreble],
  ['vtc-basic', createVtcBasic],
  ['ear', createEar],
  ['ear-proactive', createEarProactive],
  ['pd-static', createPdStatic],
  ['program-ttl', createProgramTtl]
]);

export function policyNames (): string[] {
  return [...registry.keys()];
}

export function createPolicy (name: string, config: Readonly<Record<string, unknown>> = {}): Policy {
  const factory = registry.get(name);
  if (!factory) throw new RangeError(`unknown policy "${name}"; known: ${policyNames().join(', ')}`);
  return factory(config);
}

/** Adds a policy under a new name; later issues' policies register here. */
export function registerPolicy (name: string, factory: PolicyFactory): void {
  if (registry.has(name)) throw new RangeError(`policy "${name}" is already registered`);
  registry.set(name, factory);
}
