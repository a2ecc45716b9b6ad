// A request's priority class (docs/architecture.md#accept): what the client asks for in
// x-ear-priority, else what its API key is configured with, else normal. Admission ranks by it first.
import { DEFAULT_CLASS, PRIORITY_CLASSES } from '../core/admission.js';
import { EarError } from '../errors/errors.js';

/** The priority class a request asks for: x-ear-priority (a class name or its rank), else its API key's, else normal. */
export function priorityClassOf (header: string, apiKey: string | null, byKey: Readonly<Record<string, string>>): number {
  const v = header.trim().toLowerCase();
  if (v !== '') {
    const byName = (PRIORITY_CLASSES as readonly string[]).indexOf(v);
    if (byName >= 0) return byName;
    if (/^[0-9]$/.test(v) && Number(v) < PRIORITY_CLASSES.length) return Number(v);
    throw new EarError('EAR_ERR_BAD_HEADER', `x-ear-priority must be one of ${PRIORITY_CLASSES.join(', ')} (or 0-${PRIORITY_CLASSES.length - 1}), got "${header.slice(0, 32)}"`);
  }
  if (apiKey !== null && Object.hasOwn(byKey, apiKey)) return (PRIORITY_CLASSES as readonly string[]).indexOf(byKey[apiKey]);
  return DEFAULT_CLASS;
}
