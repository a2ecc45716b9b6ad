// The gateway's flags, shared by `ear serve` and `ear epp`: one parseArgs table and one mapping from flags to
// config fields, so both commands read a YAML file and flags the same way (flags override the file).
import { parseArgs } from 'node:util';
import { buildConfig, loadConfigFile, type GatewayConfig } from '../config/index.js';

type OptionSpec = { type: 'string' | 'boolean'; multiple?: boolean; short?: string };

/** parseArgs options of every gateway setting a flag can give. */
export const GATEWAY_OPTIONS = {
  config: { type: 'string' },
  backend: { type: 'string', multiple: true },
  host: { type: 'string' },
  port: { type: 'string' },
  policy: { type: 'string' },
  tokenizer: { type: 'string' },
  'block-size': { type: 'string' },
  'route-threads': { type: 'string' },
  'http-threads': { type: 'string' },
  'assumed-ttl-ms': { type: 'string' },
  'prefix-index-warm': { type: 'boolean' },
  'prefix-index-keys': { type: 'string' },
  'admin-token': { type: 'string' },
  'api-key': { type: 'string', multiple: true },
  'max-body-bytes': { type: 'string' },
  'max-header-bytes': { type: 'string' },
  'client-body-timeout-ms': { type: 'string' },
  scheduler: { type: 'string' },
  'max-queued': { type: 'string' },
  'queue-timeout-ms': { type: 'string' },
  'prefill-budget-tokens': { type: 'string' },
  'session-store': { type: 'string' },
  'max-contexts': { type: 'string' },
  'max-pods': { type: 'string' },
  'kv-connectors': { type: 'string' },
  'kv-connector': { type: 'string' },
  'proactive-interval-ms': { type: 'string' },
  'proactive-body-cache-bytes': { type: 'string' },
  ha: { type: 'string' },
  'lease-name': { type: 'string' },
  discovery: { type: 'string' },
  kubeconfig: { type: 'string' },
  namespace: { type: 'string' },
  'label-selector': { type: 'string' },
  'inference-pool': { type: 'string' },
  help: { type: 'boolean', short: 'h' }
} as const satisfies Record<string, OptionSpec>;

/**
 * The config fields the flags in `values` set (undefined: not given), for buildConfig. `extraBackends` are
 * `--backend` specs added after the flags' own (demo engines); `tokenizer` replaces an absent --tokenizer.
 */
export function gatewayFlags (values: Record<string, unknown>, extraBackends: readonly string[] = [], tokenizer?: string): Record<string, unknown> {
  return {
    host: values.host,
    port: values.port,
    policy: values.policy,
    tokenizer: values.tokenizer ?? tokenizer,
    blockSize: values['block-size'],
    routeThreads: values['route-threads'],
    httpThreads: values['http-threads'],
    assumedTtlMs: values['assumed-ttl-ms'],
    prefixIndexWarm: values['prefix-index-warm'],
    prefixIndexKeys: values['prefix-index-keys'],
    adminToken: values['admin-token'],
    apiKeys: values['api-key'],
    maxBodyBytes: values['max-body-bytes'],
    maxHeaderBytes: values['max-header-bytes'],
    clientBodyTimeoutMs: values['client-body-timeout-ms'],
    scheduler: values.scheduler,
    maxQueued: values['max-queued'],
    queueTimeoutMs: values['queue-timeout-ms'],
    prefillBudgetTokens: values['prefill-budget-tokens'],
    sessionStore: values['session-store'],
    maxContexts: values['max-contexts'],
    maxPods: values['max-pods'],
    kvConnectors: values['kv-connectors'],
    kvConnector: values['kv-connector'],
    proactiveIntervalMs: values['proactive-interval-ms'],
    proactiveBodyCacheBytes: values['proactive-body-cache-bytes'],
    // Over single fields of the file's `discovery` section (buildConfig merges them).
    discovery: {
      kind: values.discovery, kubeconfig: values.kubeconfig, namespace: values.namespace,
      labelSelector: values['label-selector'], inferencePool: values['inference-pool']
    },
    backend: [...((values.backend as string[] | undefined) ?? []), ...extraBackends]
  };
}

/**
 * The validated config: the --config file (if any) under the flags. `fileDefaults` fill fields neither the file
 * nor a flag sets (`ear epp` listens on another port by default). Throws ConfigError.
 */
export function readGatewayConfig (values: Record<string, unknown>, extraBackends: readonly string[] = [], tokenizer?: string,
  fileDefaults: Record<string, unknown> = {}): Readonly<GatewayConfig> {
  const file = values.config ? loadConfigFile(values.config as string) : {};
  const merged = { ...fileDefaults, ...file };
  return buildConfig(merged, { ...gatewayFlags(values, extraBackends, tokenizer), ha: haFlags(merged.ha, values.ha as string | undefined, values['lease-name'] as string | undefined) });
}

/**
 * The `ha` setting from the file's `ha:` section with --ha and --lease-name over it (flags override a field, not
 * the whole section); undefined when neither the file nor a flag says anything.
 */
function haFlags (fromFile: unknown, mode: string | undefined, leaseName: string | undefined): unknown {
  if (mode === undefined && leaseName === undefined) return undefined;
  const base = typeof fromFile === 'string' ? { mode: fromFile } : typeof fromFile === 'object' && fromFile !== null && !Array.isArray(fromFile) ? fromFile : {};
  return { ...base, ...(mode === undefined ? {} : { mode }), ...(leaseName === undefined ? {} : { leaseName }) };
}

/**
 * Parses a gateway command's flags (GATEWAY_OPTIONS and its own `extra`): the values, or the exit code once the
 * usage is printed (--help: 0; a bad flag: 2, with the reason).
 */
export function parseGatewayArgs (argv: string[], extra: Record<string, OptionSpec>, command: string, usage: string): Record<string, unknown> | number {
  let values: Record<string, unknown>;
  try {
    ({ values } = parseArgs({ args: argv, strict: true, options: { ...GATEWAY_OPTIONS, ...extra } }));
  } catch (err) {
    console.error(`${command}: ${(err as Error).message}\n\n${usage}`);
    return 2;
  }
  if (values.help) {
    console.log(usage);
    return 0;
  }
  return values;
}
