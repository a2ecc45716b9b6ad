// Reads a policy's config: every knob has a default, unknown knobs and values of the wrong type or range are
// rejected with an error that names the policy, the knob and what it accepts.

export type KnobCheck = (value: unknown) => string | null;

/** A finite number ≥ min (and ≤ max when given). */
export function num (min: number, max = Infinity): KnobCheck {
  return (v) => (typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max)
    ? null
    : `a number in [${min}, ${max === Infinity ? '∞' : max}]`;
}

/** An integer ≥ min. */
export function int (min: number): KnobCheck {
  return (v) => (typeof v === 'number' && Number.isInteger(v) && v >= min) ? null : `an integer ≥ ${min}`;
}

/** true or false (an ablation switch). */
export function bool (): KnobCheck {
  return (v) => (typeof v === 'boolean' ? null : 'true or false');
}

export function oneOf (choices: readonly string[]): KnobCheck {
  return (v) => (typeof v === 'string' && choices.includes(v)) ? null : `one of ${choices.map((c) => `"${c}"`).join(', ')}`;
}

/** The defaults overlaid with `config`; throws RangeError on an unknown knob, TypeError on a bad value. */
export function readKnobs<T extends Record<string, number | string | boolean>> (
  policy: string,
  config: Readonly<Record<string, unknown>>,
  defaults: T,
  checks: { readonly [K in keyof T]: KnobCheck }
): T {
  const out: Record<string, unknown> = { ...defaults };
  for (const [key, value] of Object.entries(config)) {
    if (!Object.hasOwn(defaults, key)) {
      throw new RangeError(`policy "${policy}": unknown knob "${key}"; known: ${Object.keys(defaults).join(', ')}`);
    }
    const wants = checks[key as keyof T](value);
    if (wants !== null) throw new TypeError(`policy "${policy}": knob "${key}" must be ${wants}, got ${JSON.stringify(value)}`);
    out[key] = value;
  }
  return out as T;
}
