// `ear eval --set K=V` and `--sweep K=…` for a policy's own knobs (ear's tHot, tCool, minGain, …). Policies
// reject knobs they do not have (knobs.ts), and one run compares several policies, so a knob goes to each
// policy that takes it and the others run with their defaults. Which policy takes which knob is asked of the
// registry itself, so a knob added to a policy needs no change here.
import { createPolicy } from '../core/policies/index.js';

export type PolicyKnobs = Record<string, number | string | boolean>;

/** A --set value as a policy sees it: a number when it reads as one. */
export function knobValue (v: string): number | string | boolean {
  if (v === 'true' || v === 'false') return v === 'true';
  const n = Number(v);
  return v.trim() !== '' && Number.isFinite(n) ? n : v;
}

/** Whether `config` is rejected as naming a knob the policy does not have. */
function unknownKnob (policy: string, config: Record<string, unknown>): boolean {
  try {
    createPolicy(policy, config);
    return false;
  } catch (err) {
    if (err instanceof RangeError && /unknown knob/.test(err.message)) return true;
    throw err;
  }
}

/** Whether `policy` has the knob `key`; throws (TypeError) when it has it but `value` is out of its range. A
 *  policy without knobs ignores its config (round-robin, sticky, …): it has none, whatever it accepts. */
function takes (policy: string, key: string, value: number | string | boolean): boolean {
  if (!unknownKnob(policy, { '\u0000probe': 1 })) return false;
  return !unknownKnob(policy, { [key]: value });
}

/** The policies among `policies` that take `key` (empty: it is no policy knob). */
export function policiesTaking (policies: readonly string[], key: string, value: number | string | boolean): string[] {
  return policies.filter((p) => takes(p, key, value));
}

/** The knobs of `knobs` that `policy` has, as its config. */
export function configFor (policy: string, knobs: PolicyKnobs): PolicyKnobs {
  const out: PolicyKnobs = {};
  for (const [k, v] of Object.entries(knobs)) if (takes(policy, k, v)) out[k] = v;
  return out;
}
