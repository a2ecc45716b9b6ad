// docs/configuration.md against the configuration the code accepts, so that the reference cannot drift: every key
// the validator accepts is documented, every documented key is accepted, every default shown is the one a config
// without that key gets, and every flag shown sets its row's key. What is accepted is asked of buildConfig itself
// (its unknown-field errors list the known keys), not of a list kept beside it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { buildConfig, ConfigError } from '../../src/config/index.js';
import { BACKEND_DEFAULTS } from '../../src/config/backends.js';
import { GATEWAY_OPTIONS, gatewayFlags, readGatewayConfig } from '../../src/cli/serve-options.js';

const PAGE = readFileSync(fileURLToPath(new URL('../../../docs/configuration.md', import.meta.url)), 'utf8');

interface Row { key: string; aliases: string[]; defaultCell: string; flags: string[] }

/** The rows of the page's tables whose first cell is a key: `key` (`alias`, …) | default | flag | what. */
function rows (): Row[] {
  const out: Row[] = [];
  for (const line of PAGE.split('\n')) {
    if (!line.startsWith('| `')) continue;
    const [keyCell, defaultCell, flagCell] = line.split('|').slice(1, -1).map((c) => c.trim());
    const [key, ...aliases] = [...keyCell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
    const flags = [...flagCell.matchAll(/`--([a-z-]+)`/g)].map((m) => m[1]);
    out.push({ key, aliases, defaultCell, flags });
  }
  return out;
}

/** The documented paths, aliases included (`backends[].kv-events` beside `backends[].kvEvents`). */
function documented (): Set<string> {
  const paths = new Set<string>();
  for (const r of rows()) {
    paths.add(r.key);
    const parent = r.key.includes('.') ? r.key.slice(0, r.key.lastIndexOf('.') + 1) : '';
    for (const a of r.aliases) paths.add(parent + a);
  }
  return paths;
}

/** The keys buildConfig lists as known when it refuses `probe`, or null when it refuses it for another reason. */
function knownKeys (probe: () => unknown, at: string): string[] | null {
  try {
    probe();
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    const m = new RegExp(`^config ${at.replace(/[.[\]]/g, '\\$&')}: unknown field \\(known: (.*)\\)$`).exec(err.message);
    return m === null ? null : m[1].split(', ');
  }
  return null;
}

const ODD = '~undocumented';

/** Every key path the validator accepts: top-level keys, the keys of each mapping with a fixed set, a backend's. */
function accepted (): Set<string> {
  const paths = new Set<string>();
  const top = knownKeys(() => buildConfig({ [ODD]: 1 }), ODD);
  assert.ok(top !== null, 'an unknown top-level key is refused with the known ones listed');
  for (const k of top) {
    paths.add(k);
    if (k === 'backends') continue;
    const inner = knownKeys(() => buildConfig({ [k]: { [ODD]: 1 } }), `${k}.${ODD}`);
    for (const s of inner ?? []) paths.add(`${k}.${s}`);
  }
  const backend = knownKeys(() => buildConfig({ backends: [{ url: 'http://127.0.0.1:1', [ODD]: 1 }] }), `backends[0].${ODD}`);
  assert.ok(backend !== null, 'an unknown backend key is refused with the known ones listed');
  for (const s of backend) paths.add(`backends[].${s}`);
  return paths;
}

test('every key the configuration accepts is documented in docs/configuration.md, and every documented key is accepted', () => {
  const doc = documented();
  const ok = accepted();
  assert.ok(ok.size > 80, `the probe found the schema (${ok.size} keys)`);
  assert.deepEqual([...ok].filter((k) => !doc.has(k)).sort(), [], 'accepted but not documented');
  assert.deepEqual([...doc].filter((k) => !ok.has(k)).sort(), [], 'documented but not accepted');
});

/** What a config that does not set `path` holds there; undefined when nothing is filled in (required, or computed). */
function codeDefault (path: string): unknown {
  if (path.startsWith('backends[].')) return (BACKEND_DEFAULTS as Record<string, unknown>)[path.slice('backends[].'.length)];
  const [top, sub] = path.split('.');
  if (top === 'backends') return [];
  // A section that is null by default (discovery) shows its fields' defaults as it gets them when turned on.
  const base = top === 'discovery' && sub !== undefined ? buildConfig({ discovery: { kind: 'k8s' } }) : buildConfig({});
  const v = (base as unknown as Record<string, unknown>)[top];
  return sub === undefined ? v : (v as Record<string, unknown>)[sub];
}

const isMapping = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

test('every default docs/configuration.md shows is the code\'s, and every default the code has is shown', () => {
  const doc = documented();
  for (const r of rows()) {
    const expected = codeDefault(r.key);
    const shownValue = /^`([^`]*)`/.exec(r.defaultCell);
    if (shownValue === null) {
      // No value shown: the key has none (backends[].url, backends[].id), or it is a mapping whose fields have rows.
      assert.equal(r.defaultCell, '—', `${r.key}: a default cell is a value in backticks or —`);
      if (expected === undefined) continue;
      assert.ok(isMapping(expected) && Object.keys(expected).every((k) => doc.has(`${r.key}.${k}`)),
        `${r.key}: the code's default ${JSON.stringify(expected)} is not shown`);
      continue;
    }
    assert.deepEqual(YAML.parse(shownValue[1]), expected, `${r.key}: docs show ${shownValue[1]}`);
  }
});

test('every config flag is documented on the row of the key it sets', () => {
  const documentedOn = new Map<string, string[]>();
  for (const r of rows()) for (const f of r.flags) documentedOn.set(f, [...(documentedOn.get(f) ?? []), r.key]);
  const notKeys = ['config', 'help'];
  const sentinel = 'documented-flag';
  // --ha and --lease-name are set over the file's ha: section by readGatewayConfig, not gatewayFlags.
  const ha = readGatewayConfig({ ha: 'active-passive', 'lease-name': sentinel }).ha;
  assert.deepEqual([ha.mode, ha.leaseName], ['active-passive', sentinel]);
  const viaHa: Record<string, string> = { ha: 'ha.mode', 'lease-name': 'ha.leaseName' };
  for (const flag of Object.keys(GATEWAY_OPTIONS)) {
    if (notKeys.includes(flag)) continue;
    const value = (GATEWAY_OPTIONS as Record<string, { multiple?: boolean }>)[flag].multiple ? [sentinel] : sentinel;
    const set = gatewayFlags({ [flag]: value });
    const top = Object.entries(set).find(([k, v]) => v === value || (k === 'backend' && (v as string[]).includes(sentinel)))?.[0];
    const sub = Object.entries(set.discovery as Record<string, unknown>).find(([, v]) => v === sentinel)?.[0];
    const key = top === 'backend' ? 'backends' : top ?? (sub === undefined ? viaHa[flag] : `discovery.${sub}`);
    assert.ok(key !== undefined, `--${flag} sets a key`);
    const on = documentedOn.get(flag) ?? [];
    assert.ok(on.length > 0, `--${flag} is documented`);
    // --discovery (which sets discovery.kind) is also shown on the section's own row.
    for (const k of on) assert.ok(k === key || (k === 'backends[].url' && key === 'backends') || (flag === 'discovery' && k === 'discovery'), `--${flag} sets ${key}, but is documented on ${k}`);
  }
  for (const f of documentedOn.keys()) assert.ok(Object.hasOwn(GATEWAY_OPTIONS, f), `--${f} on the page is a flag of ear serve`);
});
